package slo

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/clock"
)

// Notifier's bounds: the queue holds QueueSize events; each is posted at
// most Attempts times, Backoff, 2×Backoff, … apart, each post given
// PostTimeout.
const (
	QueueSize   = 64
	Attempts    = 4
	Backoff     = 200 * time.Millisecond
	PostTimeout = 2 * time.Second
)

// Notifier posts Events as JSON to a webhook (workload.scale_out.webhook)
// from one goroutine of its own, started at the first event. Notify never
// blocks: with the queue full the event is dropped and counted.
type Notifier struct {
	url    string
	clk    clock.Clock
	client *http.Client

	q       chan Event
	stop    chan struct{}
	start   sync.Once
	wg      sync.WaitGroup
	closing atomic.Bool

	onDrop  func()        // hears each dropped event; may be nil
	Dropped atomic.Uint64 // events the full queue refused
	Failed  atomic.Uint64 // events given up after Attempts posts
	Sent    atomic.Uint64 // events the webhook accepted (2xx)
}

// NewNotifier returns a notifier for url; client nil is a client of its
// own; onDrop (may be nil) hears each event dropped. Close it.
func NewNotifier(url string, clk clock.Clock, client *http.Client, onDrop func()) *Notifier {
	if client == nil {
		client = &http.Client{Timeout: PostTimeout}
	}
	return &Notifier{url: url, clk: clk, client: client, onDrop: onDrop, q: make(chan Event, QueueSize), stop: make(chan struct{})}
}

func (n *Notifier) dropped() {
	n.Dropped.Add(1)
	if n.onDrop != nil {
		n.onDrop()
	}
}

// URL is the webhook's address.
func (n *Notifier) URL() string { return n.url }

// Notify queues e and reports whether it was queued.
func (n *Notifier) Notify(e Event) bool {
	if n.closing.Load() {
		n.dropped()
		return false
	}
	n.start.Do(func() {
		n.wg.Add(1)
		go n.run()
	})
	select {
	case n.q <- e:
		return true
	default:
		n.dropped()
		return false
	}
}

// Close stops the sender; events still queued are dropped.
func (n *Notifier) Close() {
	if n.closing.Swap(true) {
		return
	}
	close(n.stop)
	n.wg.Wait()
}

func (n *Notifier) run() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case e := <-n.q:
			n.deliver(e)
		}
	}
}

// deliver posts e until the webhook answers 2xx, at most Attempts times.
func (n *Notifier) deliver(e Event) {
	body, _ := json.Marshal(e)
	wait := Backoff
	for try := 1; ; try++ {
		if n.post(body) {
			n.Sent.Add(1)
			return
		}
		if try == Attempts || !n.sleep(wait) {
			n.Failed.Add(1)
			return
		}
		wait *= 2
	}
}

func (n *Notifier) post(body []byte) bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}

// sleep waits d on the notifier's clock; false when Close came first.
func (n *Notifier) sleep(d time.Duration) bool {
	done := make(chan struct{})
	t := n.clk.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return true
	case <-n.stop:
		t.Stop()
		return false
	}
}
