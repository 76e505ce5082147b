package controlplane

import (
	"cmp"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/corput/corput/internal/discovery"
)

// WeightAnnotation on a Service gives every endpoint of that Service its
// weight (1..discovery.MaxWeight; absent: 1). An origin that names several
// Services (a stable and a canary Deployment, each behind its own)
// splits its traffic by them (docs/control-plane.md, "Kubernetes").
const WeightAnnotation = "corput.io/weight"

// kubeSource follows the EndpointSlices of the Services the origins name,
// and those Services' weight annotations, with client-go shared informers,
// and offers each origin's membership to the writer whenever it changes,
// as the relay does. It works from the informers' caches only.
//
// Invariants:
//   - An origin's membership is offered only once the informers of every
//     namespace it names have synced: an empty cache is not an empty
//     Service.
//   - From each EndpointSlice endpoint (its first address, the port named
//     by the origin's ServiceRef): terminating (serving or not) drains;
//     else ready (nil is ready) serves; else it is out. The zone is the
//     endpoint's zone field. An address in several slices takes its best
//     state (serves, then drains); its weight is its first Service's.
//   - A change in which an endpoint that served is now terminating is
//     offered urgent: the writer publishes it past its debounce.
//   - While the API server cannot be reached the informers keep their
//     caches and nothing is offered: the writer keeps serving the last
//     good state.
type kubeSource struct {
	client kubernetes.Interface
	log    *slog.Logger
	offer  func(name string, m membership, urgent bool)

	mu      sync.Mutex
	closed  bool
	origins map[string][]ServiceRef // origin → the Services it names
	nss     map[string]*kubeNamespace
	last    map[string]membership // origin → last offered
	warned  map[string]bool       // bad weight annotations logged
}

// kubeNamespace is the informers of one namespace: EndpointSlices
// labelled with one of the Services named there, and Services.
type kubeNamespace struct {
	names     []string // the Services named in it, sorted
	factories []informers.SharedInformerFactory
	slices    cache.SharedIndexInformer
	services  cache.SharedIndexInformer
	stop      chan struct{}
	done      chan struct{}
	synced    bool
}

func newKubeSource(client kubernetes.Interface, log *slog.Logger, offer func(string, membership, bool)) *kubeSource {
	return &kubeSource{client: client, log: log, offer: offer,
		origins: map[string][]ServiceRef{}, nss: map[string]*kubeNamespace{},
		last: map[string]membership{}, warned: map[string]bool{}}
}

// setOrigins follows the Services the origins name (the others are
// ignored): it starts informers for a namespace newly named, restarts
// those whose set of Services changed and stops those no longer named,
// then offers every origin whose namespaces are synced.
func (k *kubeSource) setOrigins(specs []Origin) {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return
	}
	k.origins = map[string][]ServiceRef{}
	want := map[string]map[string]bool{}
	for _, o := range specs {
		if o.Services == nil {
			continue
		}
		k.origins[o.Name] = o.Services
		for _, r := range o.Services {
			if want[r.Namespace] == nil {
				want[r.Namespace] = map[string]bool{}
			}
			want[r.Namespace][r.Name] = true
		}
	}
	for name := range k.last {
		if _, ok := k.origins[name]; !ok {
			delete(k.last, name)
		}
	}
	var stopping []*kubeNamespace
	for ns, n := range k.nss {
		if names := slices.Sorted(maps.Keys(want[ns])); !slices.Equal(names, n.names) {
			stopping = append(stopping, n)
			delete(k.nss, ns)
		}
	}
	var starting []*kubeNamespace
	for ns, set := range want {
		if k.nss[ns] == nil {
			n := k.watchLocked(ns, slices.Sorted(maps.Keys(set)))
			k.nss[ns] = n
			starting = append(starting, n)
		}
	}
	k.mu.Unlock()
	for _, n := range stopping {
		close(n.stop)
		<-n.done
	}
	for _, n := range starting {
		go k.run(n)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for name := range k.origins {
		k.recomputeLocked(name)
	}
}

// watchLocked makes the informers of namespace ns for the Services names.
func (k *kubeSource) watchLocked(ns string, names []string) *kubeNamespace {
	req, err := labels.NewRequirement(discoveryv1.LabelServiceName, selection.In, names)
	if err != nil { // names are checked DNS labels: not reached
		k.log.Error("control plane: kubernetes: label selector", "namespace", ns, "err", err)
	}
	selector := labels.NewSelector().Add(*req).String()
	f := informers.NewSharedInformerFactoryWithOptions(k.client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	n := &kubeNamespace{names: names, stop: make(chan struct{}), done: make(chan struct{})}
	n.slices = f.Discovery().V1().EndpointSlices().Informer()
	// Services carry no kubernetes.io/service-name label: their informer
	// has a factory of its own, without the selector.
	sf := informers.NewSharedInformerFactoryWithOptions(k.client, 0, informers.WithNamespace(ns))
	n.services = sf.Core().V1().Services().Informer()
	onSlice := func(obj any) {
		if es, ok := unwrap(obj).(*discoveryv1.EndpointSlice); ok {
			k.changed(ns, es.Labels[discoveryv1.LabelServiceName])
		}
	}
	onService := func(obj any) {
		if s, ok := unwrap(obj).(*corev1.Service); ok {
			k.changed(ns, s.Name)
		}
	}
	_, _ = n.slices.AddEventHandler(handlers(onSlice))
	_, _ = n.services.AddEventHandler(handlers(onService))
	n.factories = []informers.SharedInformerFactory{f, sf}
	return n
}

// run starts a namespace's informers, waits for their caches, then
// offers the origins that name it.
func (k *kubeSource) run(n *kubeNamespace) {
	defer close(n.done)
	for _, f := range n.factories {
		f.Start(n.stop)
		defer f.Shutdown()
	}
	if !cache.WaitForCacheSync(n.stop, n.slices.HasSynced, n.services.HasSynced) {
		return
	}
	k.mu.Lock()
	n.synced = true
	for name := range k.origins {
		k.recomputeLocked(name)
	}
	k.mu.Unlock()
	<-n.stop
}

// changed recomputes the origins that name Service ns/name.
func (k *kubeSource) changed(ns, name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for origin, refs := range k.origins {
		if slices.ContainsFunc(refs, func(r ServiceRef) bool { return r.Namespace == ns && r.Name == name }) {
			k.recomputeLocked(origin)
		}
	}
}

// recomputeLocked builds an origin's membership from the caches and
// offers it when it changed.
func (k *kubeSource) recomputeLocked(origin string) {
	if k.closed {
		return
	}
	refs := k.origins[origin]
	for _, r := range refs {
		if n := k.nss[r.Namespace]; n == nil || !n.synced {
			return
		}
	}
	best := map[string]kubeEndpoint{}
	for _, r := range refs {
		n := k.nss[r.Namespace]
		weight := k.weightLocked(n, r)
		for _, obj := range n.slices.GetStore().List() {
			es := obj.(*discoveryv1.EndpointSlice)
			if es.Labels[discoveryv1.LabelServiceName] != r.Name {
				continue
			}
			for _, e := range endpointsOfSlice(es, r.Port) {
				e.Weight = weight
				if old, ok := best[e.Address]; !ok || e.state < old.state {
					best[e.Address] = e
				}
			}
		}
	}
	var m membership
	terminating := map[string]bool{}
	for _, addr := range slices.Sorted(maps.Keys(best)) {
		e := best[addr]
		switch e.state {
		case kubeServing:
			m.endpoints = append(m.endpoints, e.Endpoint)
		case kubeTerminating:
			m.draining = append(m.draining, addr)
			terminating[addr] = true
		}
	}
	if m.endpoints == nil {
		m.endpoints = []discovery.Endpoint{}
	}
	prev, seen := k.last[origin]
	if seen && slices.Equal(prev.endpoints, m.endpoints) && slices.Equal(prev.draining, m.draining) {
		return
	}
	urgent := slices.ContainsFunc(prev.endpoints, func(e discovery.Endpoint) bool { return terminating[e.Address] })
	k.last[origin] = m
	k.offer(origin, m, urgent)
}

// reoffer offers every origin's membership as last computed, not urgent
// (a writer that has just opened takes them).
func (k *kubeSource) reoffer() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(k.last)) {
		k.offer(name, k.last[name], false)
	}
}

// weightLocked reads a Service's weight annotation; a bad one is logged
// once and counts as 1.
func (k *kubeSource) weightLocked(n *kubeNamespace, r ServiceRef) int {
	obj, ok, _ := n.services.GetStore().GetByKey(r.Namespace + "/" + r.Name)
	if !ok {
		return 1
	}
	v, ok := obj.(*corev1.Service).Annotations[WeightAnnotation]
	if !ok {
		return 1
	}
	w, err := strconv.Atoi(v)
	if err != nil || w < 1 || w > discovery.MaxWeight {
		if key := r.Namespace + "/" + r.Name + "=" + v; !k.warned[key] {
			k.warned[key] = true
			k.log.Warn("control plane: kubernetes: a Service's weight annotation is not a whole number in 1..1000000; its endpoints get weight 1",
				"service", r.Namespace+"/"+r.Name, "annotation", WeightAnnotation, "value", v)
		}
		return 1
	}
	return w
}

// close stops every informer.
func (k *kubeSource) close() {
	k.mu.Lock()
	k.closed = true
	nss := slices.Collect(maps.Values(k.nss))
	k.nss = map[string]*kubeNamespace{}
	k.mu.Unlock()
	for _, n := range nss {
		close(n.stop)
		<-n.done
	}
}

// kubeState is an endpoint's state, best first.
type kubeState int

const (
	kubeServing kubeState = iota
	kubeTerminating
	kubeOut
)

type kubeEndpoint struct {
	discovery.Endpoint
	state kubeState
}

// endpointsOfSlice lists a slice's endpoints on the port named port (""
// also takes a slice's only port), each at its first address with its
// zone and state. FQDN slices, and endpoints without an address, give
// none.
func endpointsOfSlice(es *discoveryv1.EndpointSlice, port string) []kubeEndpoint {
	if es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6 {
		return nil
	}
	var p *int32
	for _, sp := range es.Ports {
		if ptrOr(sp.Name, "") == port || (port == "" && len(es.Ports) == 1) {
			p = sp.Port
			break
		}
	}
	if p == nil {
		return nil
	}
	out := make([]kubeEndpoint, 0, len(es.Endpoints))
	for _, e := range es.Endpoints {
		if len(e.Addresses) == 0 {
			continue
		}
		c := e.Conditions
		state := kubeOut
		switch {
		case ptrOr(c.Terminating, false):
			state = kubeTerminating
		case ptrOr(c.Ready, true):
			state = kubeServing
		}
		ep := discovery.Endpoint{Address: net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(*p))), Zone: ptrOr(e.Zone, ""), Weight: 1}
		if ep.Validate() != nil {
			continue
		}
		out = append(out, kubeEndpoint{ep, state})
	}
	slices.SortFunc(out, func(a, b kubeEndpoint) int { return cmp.Compare(a.Address, b.Address) })
	return out
}

func ptrOr[T any](p *T, d T) T {
	if p == nil {
		return d
	}
	return *p
}

// unwrap returns the object of an informer notification, that of a
// deletion the cache saw only as a tombstone included.
func unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// handlers calls f on every add, update and delete.
func handlers(f func(any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{AddFunc: f, UpdateFunc: func(_, obj any) { f(obj) }, DeleteFunc: f}
}
