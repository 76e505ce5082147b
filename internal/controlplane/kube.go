package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/connrotation"
)

// StateKubernetesPrefix starts a --state that keeps the state in the
// Kubernetes API: "kubernetes:NAMESPACE/NAME".
const StateKubernetesPrefix = "kubernetes:"

// kubeStateRef parses a --state of StateKubernetesPrefix; ok is false
// for a file.
func kubeStateRef(state string) (ns, name string, ok bool, err error) {
	ref, ok := strings.CutPrefix(state, StateKubernetesPrefix)
	if !ok {
		return "", "", false, nil
	}
	ns, name, found := strings.Cut(ref, "/")
	if !found || ns == "" || name == "" {
		return "", "", true, fmt.Errorf("--state %q: write kubernetes:NAMESPACE/NAME (the namespace of the state's ConfigMaps and Lease, and the name they start with)", state)
	}
	var errs []error
	if msgs := validationLabel(ns); msgs != "" {
		errs = append(errs, fmt.Errorf("--state %q: namespace %q: %s", state, ns, msgs))
	}
	// NAME-fleet, NAME-origin-… must stay DNS names: NAME is a label of 40 at most.
	if msgs := validationLabel(name); msgs != "" || len(name) > 40 {
		errs = append(errs, fmt.Errorf("--state %q: name %q must be a DNS label of at most 40 characters (lower case, digits, '-') %s", state, name, msgs))
	}
	return ns, name, true, errors.Join(errs...)
}

// kubeClient is the control plane's way to the Kubernetes API: a
// clientset whose every request tells apiHealth whether the API server
// answered, on connections of its own that close closes.
type kubeClient struct {
	kubernetes.Interface
	health *apiHealth
	dialer *connrotation.Dialer
}

// newKubeClient builds the client from opts.Kube (tests), the
// --kubeconfig file, or the pod's service account.
func newKubeClient(opts *Options, m *Metrics, clk func() time.Time) (*kubeClient, error) {
	var cfg *rest.Config
	var err error
	switch {
	case opts.Kube != nil:
		cfg = rest.CopyConfig(opts.Kube)
	case opts.Kubeconfig != "":
		if cfg, err = clientcmd.BuildConfigFromFlags("", opts.Kubeconfig); err != nil {
			return nil, configError{fmt.Errorf("--kubeconfig: %w", err)}
		}
	default:
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, configError{fmt.Errorf("the Kubernetes API: %w; outside a cluster give --kubeconfig FILE", err)}
		}
	}
	cfg.UserAgent = "corput-control-plane"
	cfg.QPS, cfg.Burst = 50, 100
	// Protobuf, as Kubernetes' own controllers speak it: cheaper to
	// decode than JSON.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	k := &kubeClient{health: &apiHealth{metrics: m, now: clk, up: true}}
	k.dialer = connrotation.NewDialer((&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	cfg.Dial = k.dialer.DialContext
	cfg.Wrap(k.health.wrap)
	_, _, state, _ := kubeStateRef(opts.StatePath)
	m.registerKube(state)
	m.KubeUp.Set(1)
	if k.Interface, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, configError{fmt.Errorf("the Kubernetes API: %w", err)}
	}
	return k, nil
}

// close closes every connection to the API server.
func (k *kubeClient) close() { k.dialer.CloseAll() }

// apiHealth is whether the API server answers: a request that gets a
// response below 500 says yes, one that fails to reach it (or gets 5xx)
// says no, from then until the next that gets through.
type apiHealth struct {
	metrics *Metrics
	now     func() time.Time

	mu    sync.Mutex
	up    bool
	since time.Time
	err   error
}

func (h *apiHealth) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		switch {
		case err != nil && req.Context().Err() == nil:
			h.set(false, err)
		case err == nil && resp.StatusCode >= 500:
			h.set(false, fmt.Errorf("%s %s: %s", req.Method, req.URL.Path, resp.Status))
		case err == nil:
			h.set(true, nil)
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (h *apiHealth) set(up bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if up != h.up {
		h.since = h.now()
		if up {
			h.metrics.KubeUp.Set(1)
		} else {
			h.metrics.KubeUp.Set(0)
		}
	}
	h.up, h.err = up, err
}

// detail is "" while the API server answers, else a line saying since
// when it does not and that the last good state is served.
func (h *apiHealth) detail() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.up {
		return ""
	}
	return fmt.Sprintf("kubernetes API unreachable since %s (%v): serving the last good state\n",
		h.since.UTC().Format(time.RFC3339), h.err)
}

// kubeRole is a control plane whose state is in the Kubernetes API: every
// replica follows the state's ConfigMaps and serves them; the one that
// holds the Lease writes (the writer, with a kubeStore) and assigns
// fleet positions.
type kubeRole struct {
	c        *ControlPlane
	ns, name string
	elector  *elector
	states   cache.SharedIndexInformer
	factory  informers.SharedInformerFactory
	port     *fleetPort
	synced   chan struct{}
	elected  chan struct{} // closed when the election has ended (the Lease released)

	mu     sync.Mutex // guards following
	store  *kubeStore // the leader's; nil on a follower
	target string     // the leader's fleet address as last seen
}

// startKube starts following the state and taking part in the election.
func (c *ControlPlane) startKube(ctx context.Context, ns, name string) {
	k := &kubeRole{c: c, ns: ns, name: name, port: c.fleetPort, synced: make(chan struct{}), elected: make(chan struct{})}
	c.kubeRole = k
	c.follow = &follower{server: c.server, metrics: c.metrics, log: c.log}
	k.factory = informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = StateLabel + "=" + name }))
	k.states = k.factory.Core().V1().ConfigMaps().Informer()
	_, _ = k.states.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.stateChanged(obj, false) },
		UpdateFunc: func(_, obj any) { k.stateChanged(obj, false) },
		DeleteFunc: func(obj any) { k.stateChanged(unwrap(obj), true) },
	})
	k.factory.Start(ctx.Done())
	c.goRun(func() {
		if cache.WaitForCacheSync(ctx.Done(), k.states.HasSynced) {
			close(k.synced)
			k.followState()
		}
	})
	k.elector = newElector(&elector{
		client: c.kube, ns: ns, name: name, id: c.opts.ID, addr: c.opts.Advertise,
		duration: c.opts.LeaseDuration, retry: c.opts.LeaseRetry, clk: c.opts.Clock, log: c.log, metrics: c.metrics,
		lead: k.lead, leader: k.leaderSeen,
	})
	go func() {
		defer close(k.elected)
		k.elector.run(ctx)
		k.factory.Shutdown()
	}()
	c.goRun(k.port.serve)
	c.goRun(func() { _ = c.server.Serve(k.port.local) })
}

// stateChanged is told of a state object's change: on the leader, one
// another writer made is written over; on a follower, the state is
// served again from the cache.
func (k *kubeRole) stateChanged(obj any, deleted bool) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	k.mu.Lock()
	store := k.store
	k.mu.Unlock()
	if store != nil {
		if store.observe(cm, deleted) {
			k.c.log.Warn("control plane: another writer changed a state object; this leader writes its own state over it",
				"object", cm.Name, "resource_version", cm.ResourceVersion)
			if w, _ := k.c.role(); w != nil {
				w.rewrite()
			}
		}
		return
	}
	select {
	case <-k.synced:
		k.followState()
	default:
	}
}

// followState serves the state as the informer's cache holds it (a
// follower's part).
func (k *kubeRole) followState() {
	if w, _ := k.c.role(); w != nil {
		return
	}
	var items []corev1.ConfigMap
	for _, obj := range k.states.GetStore().List() {
		items = append(items, *obj.(*corev1.ConfigMap))
	}
	st, err := stateOf(k.name, items)
	if err != nil {
		k.c.follow.mu.Lock()
		k.c.follow.refusedLocked(err)
		k.c.follow.mu.Unlock()
		return
	}
	k.c.follow.publish(st)
}

// leaderSeen is told of each leader the Lease names: a follower forwards
// the fleet port there.
func (k *kubeRole) leaderSeen(id, addr string) {
	if id != "" {
		k.c.log.Info("control plane: the Lease names a leader", "leader", id, "fleet_address", addr, "this_replica", k.c.opts.ID)
	}
	if id == k.c.opts.ID {
		return // this replica: lead serves the port itself
	}
	k.mu.Lock()
	k.target = addr
	leading := k.store != nil
	k.mu.Unlock()
	if !leading {
		k.port.setRole(false, addr)
	}
}

// lead is the leader's part, while this replica holds the Lease: it reads
// the state afresh, opens the writer on it (which publishes what differs
// from what this replica served), assigns fleet positions and applies the
// sources; when ctx ends it hands back to following.
func (k *kubeRole) lead(ctx context.Context) {
	c := k.c
	store := newKubeStore(c.kube, k.ns, k.name, k.elector.valid, c.log, c.metrics)
	st, err := store.load(ctx)
	if err != nil {
		c.log.Error("control plane: the leader cannot read the state; it steps down", "err", err)
		return
	}
	w, err := openWriter(store, st, c.opts.Debounce, c.opts.Clock, c.log, c.metrics)
	if err != nil {
		c.log.Error("control plane: the leader cannot write the state; it steps down", "err", err)
		return
	}
	k.mu.Lock()
	k.store = store
	k.mu.Unlock()
	c.roleMu.Lock()
	c.writer = w
	c.roleMu.Unlock()
	if err := w.start(c.server, c.follow.snapshot()); err != nil {
		c.log.Error("control plane: publish failed", "err", err)
	}
	if err := c.startFleet(); err != nil {
		c.log.Error("control plane: fleet positions cannot be restored", "err", err)
	}
	k.port.setRole(true, "")
	c.log.Info("control plane: leading: writing the state and assigning fleet positions", "state", store,
		"origins", len(st.Origins), "fleet", len(st.Fleet))
	c.applySources(ctx)
	w.flush()

	<-ctx.Done()
	k.mu.Lock()
	k.store = nil
	target := k.target
	k.mu.Unlock()
	k.port.setRole(false, target)
	c.roleMu.Lock()
	f := c.fleet
	c.writer, c.fleet = nil, nil
	c.roleMu.Unlock()
	if f != nil {
		f.close()
	}
	c.server.setFleet(nil)
	c.server.clearFleet()
	w.close()
	c.follow.served(w.snapshot())
	select {
	case <-k.synced:
		k.followState()
	default:
	}
}

// validationLabel is "" for a valid DNS label, else why not.
func validationLabel(s string) string {
	return strings.Join(validation.IsDNS1123Label(s), "; ")
}
