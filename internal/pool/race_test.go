package pool_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/rng"
)

// Many goroutines acquire and release on the wall clock while the lifecycle
// (keepalive, idle eviction, recycling, pre-warming) runs under them with
// tiny timeouts. Asserted: invariants, never more streams on a connection
// than it carries, never a closed connection handed out, the cap held, and
// nothing left open after Close. Nothing about speed.
func TestConcurrentUseOnTheRealClock(t *testing.T) {
	for _, streams := range []int{1, 4} {
		t.Run(fmt.Sprintf("streams=%d", streams), func(t *testing.T) {
			c := pool.DefaultConfig()
			c.MaxConnections, c.MaxPending, c.AcquireTimeout = 6, 1000, 30*time.Second
			c.Prewarm, c.IdleTimeout, c.MaxLifetime = 1, 2*time.Millisecond, 5*time.Millisecond
			c.Keepalive, c.KeepaliveTimeout = time.Millisecond, 2*time.Millisecond
			d := memconn.New(clock.Real(), memconn.Config{Streams: streams,
				DialLatency: 50 * time.Microsecond, PingLatency: 20 * time.Microsecond})
			tally := &pool.Tally{}
			p, err := pool.New(addr, 0, c, d, clock.Real(), rng.New(1), tally)
			if err != nil {
				t.Fatal(err)
			}

			var mu sync.Mutex
			inUse := map[*memconn.Conn]*atomic.Int32{}
			counter := func(c *memconn.Conn) *atomic.Int32 {
				mu.Lock()
				defer mu.Unlock()
				if inUse[c] == nil {
					inUse[c] = &atomic.Int32{}
				}
				return inUse[c]
			}
			use := func(l pool.Lease) error {
				conn := l.Conn().(*memconn.Conn)
				if conn.Closed() {
					return fmt.Errorf("handed out closed conn %d", conn.ID())
				}
				n := counter(conn)
				if k := n.Add(1); int(k) > streams {
					return fmt.Errorf("conn %d carries %d streams, max %d", conn.ID(), k, streams)
				}
				runtime.Gosched()
				n.Add(-1)
				return nil
			}

			stop := make(chan struct{})
			checked := make(chan error, 1)
			go func() {
				for {
					if err := p.CheckInvariants(); err != nil {
						checked <- err
						return
					}
					select {
					case <-stop:
						checked <- nil
						return
					default:
						runtime.Gosched()
					}
				}
			}()

			const workers, rounds = 8, 300
			errs := make(chan error, workers)
			var wg sync.WaitGroup
			for g := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rng.New(uint64(g))
					for i := range rounds {
						switch {
						case r.IntN(40) == 0: // an idle gap for the lifecycle to act in
							time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
						case g == 0 && i%100 == 0 && d.Last() != nil:
							d.Last().ClosePeer()
						case g == 1 && i%100 == 0 && d.Last() != nil && streams == 1:
							// Only HTTP/1.1: a multiplexed connection may
							// legitimately be closed under a stream by a
							// failed probe.
							d.Last().Blackhole()
						}
						var l pool.Lease
						var err error
						switch r.IntN(3) {
						case 0:
							l, err = p.Acquire(context.Background())
						case 1: // a caller that may give up
							ctx, cancel := context.WithCancel(context.Background())
							if i%2 == 0 {
								cancel()
							}
							l, err = p.Acquire(ctx)
							cancel()
							if errors.Is(err, context.Canceled) {
								continue
							}
						default:
							ch := make(chan struct{})
							p.AcquireAsync(func(got pool.Lease, e error) { l, err = got, e; close(ch) })
							<-ch
						}
						if err != nil {
							errs <- err
							return
						}
						if err := use(l); err != nil {
							errs <- err
							return
						}
						if r.IntN(50) == 0 {
							l.Discard()
						} else {
							l.Release()
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			if err := <-checked; err != nil {
				t.Fatalf("invariant broken under concurrency: %v", err)
			}
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if m := d.Stats().MaxOpen; m > int64(c.MaxConnections) {
				t.Fatalf("origin saw %d connections open, cap %d", m, c.MaxConnections)
			}
			p.Close()
			// Dials in flight at Close close their connection when
			// they land; wait for that (a bound, not a speed check).
			for deadline := time.Now().Add(10 * time.Second); d.Stats().Open != 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d connections left open after Close", d.Stats().Open)
				}
			}
			for _, r := range pool.CloseReasons() {
				t.Logf("closed %v: %d", r, tally.Closed(r))
			}
			if created, closed := tally.Created(), tally.ClosedTotal(); created != closed {
				t.Fatalf("observer: %d created, %d closed", created, closed)
			}
		})
	}
}

// Free is read without the lock (Borrow, Ready, the forward path's "own
// pool has none" check). A multiplexed connection that stays below its
// stream limit never leaves the free list, so a reader must never see 0
// while requests come and go on it: a release that moved the connection
// to the back by taking it off and putting it on again showed 0 for an
// instant, and a loop that read it then dialled a second connection to an
// endpoint whose first one was nearly idle (bench/peers tls_origins' 17th
// connection).
func TestFreeNeverReadsZeroWhileAMultiplexedConnectionHasStreams(t *testing.T) {
	d := memconn.New(clock.Real(), memconn.Config{Streams: 250})
	tally := &pool.Tally{}
	p, err := pool.New(addr, 0, cfg(), d, clock.Real(), rng.New(1), tally)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	first, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release()

	const workers, rounds = 4, 20000
	var stop atomic.Bool
	var zeros, reads atomic.Int64
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for !stop.Load() {
			if p.Free() == 0 {
				zeros.Add(1)
			}
			reads.Add(1)
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l, ok := p.TryAcquire(false)
				if !ok {
					t.Error("TryAcquire found no free stream on a connection of 250 with at most 5 in use")
					return
				}
				l.Release()
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	readers.Wait()
	if n := zeros.Load(); n != 0 {
		t.Fatalf("Free read 0 in %d of %d reads while the one connection had free streams", n, reads.Load())
	}
	if n := tally.Created(); n != 1 {
		t.Fatalf("%d connections created, want 1", n)
	}
}
