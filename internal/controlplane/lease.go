package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/corput/corput/internal/clock"
)

// Lease defaults (--lease-duration, --lease-retry), client-go's core
// components' values.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultLeaseRetry    = 2 * time.Second
)

// AddressAnnotation on the Lease is the fleet address (--advertise) of
// the replica that holds it: the other replicas forward gateways' fleet
// streams there.
const AddressAnnotation = "corput.io/fleet-address"

// errNotLeading refuses a state write by a replica that may no longer
// hold the Lease.
var errNotLeading = errors.New("this replica may no longer hold the Lease: it writes nothing until it renews it")

// elector holds a coordination.k8s.io/v1 Lease for one replica among
// several, in the record format of client-go's leaderelection (holder,
// leaseDurationSeconds, acquireTime, renewTime, leaseTransitions), and
// runs lead while it holds it (docs/decisions.md, "State and leadership
// in the Kubernetes API").
//
// Invariants:
//   - A replica takes the Lease only when its holder has let it go (an
//     empty holder), or when the record has not changed for the record's
//     own duration as this replica observed it, on its own clock: the
//     Lease is watched, so the observation starts when the holder's last
//     renewal arrives, and the take-over comes at most a round trip after
//     LeaseDuration from there.
//   - Every write carries the resourceVersion last seen: of two replicas
//     that try at once, one wins.
//   - The holder renews every retry period. It leads (valid) only until
//     renewDeadline (two thirds of the duration) after the start of its
//     last successful renewal, then steps down: another replica takes over
//     no earlier than the full duration after that renewal, so the two
//     never write at once. A holder paused for longer (SIGSTOP) finds its
//     renewal refused, and steps down.
//   - On ctx's end the holder stops leading, waits for lead to return,
//     then releases the Lease (an empty holder, a duration of 1 s), so that
//     another replica takes over at once.
type elector struct {
	client   kubernetes.Interface
	ns, name string
	id, addr string // this replica's identity and fleet address
	duration time.Duration
	deadline time.Duration // renewDeadline
	retry    time.Duration
	clk      clock.Clock
	log      *slog.Logger
	metrics  *Metrics
	lead     func(ctx context.Context) // runs while leading
	leader   func(id, addr string)     // told of each leader observed ("" for none)

	mu       sync.Mutex
	lease    *coordinationv1.Lease // as last seen or written
	observed time.Time             // when the record last changed, as seen here
	leading  bool
	renewed  time.Time // the start of the last successful acquire or renew
	told     string    // the leader last told
	kick     chan struct{}
}

func newElector(e *elector) *elector {
	e.deadline = e.duration * 2 / 3
	e.kick = make(chan struct{}, 1)
	return e
}

// valid reports whether this replica may act as the leader now.
func (e *elector) valid() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.leading && e.clk.Now().Before(e.renewed.Add(e.deadline)) {
		return nil
	}
	return errNotLeading
}

// isLeading reports whether this replica holds the Lease (as last known).
func (e *elector) isLeading() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leading
}

// run takes part in the election until ctx ends, then releases the Lease
// if it holds it.
func (e *elector) run(ctx context.Context) {
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		e.watch(wctx)
	}()
	defer func() { stopWatch(); <-watched }()
	for ctx.Err() == nil {
		if !e.follow(ctx) {
			return
		}
		e.holdLease(ctx)
	}
}

// watch follows the Lease with an informer, observing each change.
func (e *elector) watch(ctx context.Context) {
	lw := cache.NewListWatchFromClient(e.client.CoordinationV1().RESTClient(), "leases", e.ns, fields.OneTermEqualSelector("metadata.name", e.name))
	inf := cache.NewSharedIndexInformer(lw, &coordinationv1.Lease{}, 0, cache.Indexers{})
	_, _ = inf.AddEventHandler(handlers(func(obj any) {
		if l, ok := unwrap(obj).(*coordinationv1.Lease); ok {
			e.observe(l)
		}
	}))
	inf.Run(ctx.Done())
}

// observe takes l as the Lease's current state if it is newer than the
// one held, restarting the observation clock when its record changed.
func (e *elector) observe(l *coordinationv1.Lease) {
	e.mu.Lock()
	if e.lease != nil && (l.ResourceVersion == e.lease.ResourceVersion || olderVersion(l.ResourceVersion, e.lease.ResourceVersion)) {
		e.mu.Unlock()
		return
	}
	if e.lease == nil || !sameRecord(e.lease.Spec, l.Spec) {
		e.observed = e.clk.Now()
	}
	e.lease = l.DeepCopy()
	holder, addr := ptrOr(l.Spec.HolderIdentity, ""), l.Annotations[AddressAnnotation]
	tell := holder != e.told
	e.told = holder
	e.mu.Unlock()
	if tell && e.leader != nil {
		e.leader(holder, addr)
	}
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

func sameRecord(a, b coordinationv1.LeaseSpec) bool {
	return ptrOr(a.HolderIdentity, "") == ptrOr(b.HolderIdentity, "") &&
		ptrOr(a.LeaseDurationSeconds, 0) == ptrOr(b.LeaseDurationSeconds, 0) &&
		ptrOr(a.RenewTime, metav1.MicroTime{}).Time.Equal(ptrOr(b.RenewTime, metav1.MicroTime{}).Time) &&
		ptrOr(a.LeaseTransitions, 0) == ptrOr(b.LeaseTransitions, 0)
}

// follow waits until this replica takes the Lease (true) or ctx ends.
func (e *elector) follow(ctx context.Context) bool {
	for {
		wait := e.tryAcquire(ctx)
		if wait == 0 {
			return true
		}
		fired, stop := wakeAfter(e.clk, wait)
		select {
		case <-ctx.Done():
			stop()
			return false
		case <-e.kick:
		case <-fired:
		}
		stop()
	}
}

// tryAcquire takes the Lease if it is free or expired and reports 0; else
// it reports how long to wait before trying again (a change of the Lease
// wakes the wait early).
func (e *elector) tryAcquire(ctx context.Context) time.Duration {
	e.mu.Lock()
	cur := e.lease.DeepCopy()
	now := e.clk.Now()
	var wait time.Duration
	if cur != nil {
		if holder := ptrOr(cur.Spec.HolderIdentity, ""); holder != "" && holder != e.id {
			held := time.Duration(ptrOr(cur.Spec.LeaseDurationSeconds, 0)) * time.Second
			wait = e.observed.Add(held).Sub(now)
		}
	}
	e.mu.Unlock()
	if ctx.Err() != nil {
		return e.retry
	}
	if wait > 0 {
		return wait
	}
	start := e.clk.Now()
	got, err := e.write(ctx, cur, true)
	if err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			e.log.Warn("control plane: cannot take the Lease; trying again", "lease", e.ns+"/"+e.name, "err", err)
		}
		e.refresh(ctx)
		return e.retry
	}
	e.mu.Lock()
	e.lease, e.leading, e.renewed, e.observed = got, true, start, start
	e.mu.Unlock()
	e.metrics.Leader.Set(1)
	e.metrics.LeaderTransitions.Inc()
	e.log.Info("control plane: this replica leads: it holds the Lease", "lease", e.ns+"/"+e.name, "id", e.id,
		"duration", e.duration, "retry", e.retry)
	return 0
}

// holdLease runs lead while renewing the Lease every retry period; it
// returns when a renewal fails for renewDeadline, another replica holds
// the Lease, lead returns by itself (the Lease is released, and this
// replica waits a duration before it tries again), or ctx ends (the Lease
// is released).
func (e *elector) holdLease(ctx context.Context) {
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.lead(lctx)
	}()
	stop := func(why string, err error) {
		e.mu.Lock()
		e.leading = false
		e.mu.Unlock()
		e.metrics.Leader.Set(0)
		cancel()
		<-done
		level := slog.LevelWarn
		if ctx.Err() != nil {
			level = slog.LevelInfo
		}
		e.log.Log(context.Background(), level, "control plane: this replica steps down: "+why, "lease", e.ns+"/"+e.name, "err", err)
	}
	for {
		fired, stopTimer := wakeAfter(e.clk, e.retry)
		select {
		case <-ctx.Done():
			stopTimer()
			stop("shutting down; releasing the Lease", nil)
			e.release()
			return
		case <-done:
			stopTimer()
			stop("it could not lead; releasing the Lease to another replica", nil)
			e.release()
			// Let another replica take it before trying again.
			backoff, stopBackoff := wakeAfter(e.clk, e.duration)
			select {
			case <-ctx.Done():
			case <-backoff:
			}
			stopBackoff()
			return
		case <-fired:
		}
		if err := e.valid(); err != nil {
			stop(fmt.Sprintf("no renewal for %v", e.deadline), err)
			return
		}
		start := e.clk.Now()
		e.mu.Lock()
		cur := e.lease.DeepCopy()
		e.mu.Unlock()
		got, err := e.write(ctx, cur, false)
		switch {
		case err == nil:
			e.mu.Lock()
			e.lease, e.renewed = got, start
			e.mu.Unlock()
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			e.refresh(ctx)
			e.mu.Lock()
			holder := ""
			if e.lease != nil {
				holder = ptrOr(e.lease.Spec.HolderIdentity, "")
			}
			e.mu.Unlock()
			if holder != e.id {
				stop("another replica holds the Lease", fmt.Errorf("holder %q", holder))
				return
			}
		default:
			e.log.Warn("control plane: cannot renew the Lease; trying again until the renew deadline", "lease", e.ns+"/"+e.name,
				"deadline", e.deadline, "err", err)
		}
	}
}

// write creates or updates the Lease held by this replica: taking it
// (acquire) or renewing it, on cur's resourceVersion.
func (e *elector) write(ctx context.Context, cur *coordinationv1.Lease, acquire bool) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, max(e.retry, time.Second))
	defer cancel()
	now := metav1.NewMicroTime(e.clk.Now())
	secs := int32(max(1, e.duration/time.Second))
	api := e.client.CoordinationV1().Leases(e.ns)
	if cur == nil {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: e.name, Namespace: e.ns, Annotations: map[string]string{AddressAnnotation: e.addr}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &e.id, LeaseDurationSeconds: &secs,
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: new(int32)},
		}
		return api.Create(ctx, l, metav1.CreateOptions{})
	}
	l := cur.DeepCopy()
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AddressAnnotation] = e.addr
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &e.id, &secs, &now
	if acquire {
		transitions := ptrOr(cur.Spec.LeaseTransitions, 0)
		if ptrOr(cur.Spec.HolderIdentity, "") != e.id {
			transitions++
		}
		l.Spec.AcquireTime, l.Spec.LeaseTransitions = &now, &transitions
	}
	return api.Update(ctx, l, metav1.UpdateOptions{})
}

// refresh reads the Lease after a refused write.
func (e *elector) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(e.retry, time.Second))
	defer cancel()
	l, err := e.client.CoordinationV1().Leases(e.ns).Get(ctx, e.name, metav1.GetOptions{})
	if err == nil {
		e.observe(l)
	}
}

// release gives the Lease up (an empty holder), as client-go's
// ReleaseOnCancel does, so that another replica takes it at once.
func (e *elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), max(e.retry, time.Second))
	defer cancel()
	e.mu.Lock()
	l := e.lease.DeepCopy()
	e.mu.Unlock()
	if l == nil || ptrOr(l.Spec.HolderIdentity, "") != e.id {
		return
	}
	now := metav1.NewMicroTime(e.clk.Now())
	one := int32(1)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = new(string), &one, &now
	delete(l.Annotations, AddressAnnotation)
	if _, err := e.client.CoordinationV1().Leases(e.ns).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		e.log.Warn("control plane: cannot release the Lease; another replica takes it when it expires", "lease", e.ns+"/"+e.name, "err", err)
		return
	}
	e.log.Info("control plane: Lease released", "lease", e.ns+"/"+e.name)
}

// wakeAfter returns a channel closed d from now on clk, and the function
// that stops it.
func wakeAfter(clk clock.Clock, d time.Duration) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(ch) })
	return ch, func() { t.Stop() }
}
