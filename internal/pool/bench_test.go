package pool_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/rng"
)

// warmPool is a pool on the wall clock with n idle HTTP/1.1 connections.
func warmPool(b *testing.B, loop, n int) *pool.Pool {
	b.Helper()
	c := pool.DefaultConfig()
	c.Prewarm = n
	p, err := pool.New(fmt.Sprintf("10.0.0.%d:443", loop), loop, c,
		memconn.New(clock.Real(), memconn.Config{}), clock.Real(), rng.New(uint64(loop)), nil)
	if err != nil {
		b.Fatal(err)
	}
	if !p.Ready() {
		b.Fatal("pool not warm")
	}
	b.Cleanup(p.Close)
	return p
}

// The gateway's hot path: acquire a free stream, release it.
func BenchmarkAcquireRelease(b *testing.B) { acquireRelease(b, warmPool(b, 0, 1)) }

// acquireRelease acquires and releases a stream of p until b is done.
func acquireRelease(b *testing.B, p *pool.Pool) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := p.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
}

// The simulator's hot path: the callback runs synchronously on a warm pool.
func BenchmarkAcquireAsyncRelease(b *testing.B) {
	p := warmPool(b, 0, 1)
	var failed atomic.Bool
	cb := func(l pool.Lease, err error) {
		if err != nil {
			failed.Store(true)
			return
		}
		l.Release()
	}
	b.ReportAllocs()
	for b.Loop() {
		p.AcquireAsync(cb)
	}
	if failed.Load() {
		b.Fatal("an acquisition failed")
	}
}

// One pool per loop, as corput runs: goroutines share no lock, so the
// throughput scales with cores. Compare with BenchmarkParallelSharedPool.
func BenchmarkParallelPoolPerLoop(b *testing.B) {
	loops := runtime.GOMAXPROCS(0)
	pools := make([]*pool.Pool, loops)
	for i := range pools {
		pools[i] = warmPool(b, i, 1)
	}
	var next atomic.Int32
	acquireParallel(b, func() *pool.Pool { return pools[int(next.Add(1)-1)%loops] })
}

// The design corput avoids: every loop contends on one pool's lock.
func BenchmarkParallelSharedPool(b *testing.B) {
	p := warmPool(b, 0, runtime.GOMAXPROCS(0))
	acquireParallel(b, func() *pool.Pool { return p })
}

// acquireParallel acquires and releases from parallel goroutines, each on
// the pool that pick returns when it starts.
func acquireParallel(b *testing.B, pick func() *pool.Pool) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		p := pick()
		ctx := context.Background()
		for pb.Next() {
			l, err := p.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			l.Release()
		}
	})
}

// A cold acquisition on the fake clock: a dial, a waiter, a hand-over.
// This path allocates (the waiter, its timer, the connection); it is here
// to keep that cost visible.
func BenchmarkColdAcquire(b *testing.B) {
	clk := clock.NewFake(epoch)
	d := memconn.New(clk, memconn.Config{})
	c := pool.DefaultConfig()
	c.Prewarm = 0
	b.ReportAllocs()
	for b.Loop() {
		p, err := pool.New(addr, 0, c, d, clk, rng.New(1), nil)
		if err != nil {
			b.Fatal(err)
		}
		l, err := p.Acquire(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
		p.Close()
	}
}

// A busy HTTP/2 pool: 220 streams held on 100-stream connections (the
// first full, 60 on the second, the third dialled ahead and 60 on it), so
// every acquisition takes a stream on a connection past half full and
// checks the headroom, which the second connection's 40 cover.
func BenchmarkAcquireReleaseH2PastHalf(b *testing.B) {
	c := pool.DefaultConfig()
	c.Prewarm = 0
	p, err := pool.New("10.0.0.9:443", 0, c, memconn.New(clock.Real(), memconn.Config{Streams: 100}),
		clock.Real(), rng.New(9), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	ctx := context.Background()
	for range 220 {
		if _, err := p.Acquire(ctx); err != nil { // held until Close
			b.Fatal(err)
		}
	}
	if s := p.Stats(); s.Open != 3 {
		b.Fatalf("%d connections open, want 3", s.Open)
	}
	acquireRelease(b, p)
}

// BenchmarkBorrowFromHomeLoop is what a loop pays to take a stream of
// another loop's pool (package cluster's borrowing) while the owning loop
// uses the same pool from every other P: TryAcquire and Release on one
// HTTP/2-like connection of 100 streams. Compare with
// upstream's BenchmarkDialMTLS, the dial it saves.
func BenchmarkBorrowFromHomeLoop(b *testing.B) {
	c := pool.DefaultConfig()
	c.Prewarm = 1
	home, err := pool.New("10.0.0.9:443", 0, c, memconn.New(clock.Real(), memconn.Config{Streams: 100}), clock.Real(), rng.New(9), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(home.Close)
	if !home.Ready() {
		b.Fatal("pool not warm")
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l, ok := home.TryAcquire(true)
			if !ok {
				b.Error("no free stream to borrow")
				return
			}
			l.Release()
		}
	})
}
