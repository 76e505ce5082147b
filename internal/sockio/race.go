//go:build race

package sockio

import "sync/atomic"

// ioSync gives the race detector the order a socket gives: what a
// goroutine did before a write happens before what a goroutine does after
// the read that got those bytes. syscall.Read and syscall.Write annotate
// this for the detector; raw syscalls do not, so Conn does it with an
// atomic the detector treats as synchronisation. Race builds only.
var ioSync atomic.Int64

func beforeWrite() { ioSync.Add(1) }
func afterRead()   { ioSync.Load() }
