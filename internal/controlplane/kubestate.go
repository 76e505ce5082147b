package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
)

// The ConfigMaps that hold a control plane's state in the Kubernetes API
// carry these labels (StateLabel's value is the state's name) and data
// keys (docs/control-plane.md, "State in the Kubernetes API").
const (
	StateLabel     = "corput.io/state"
	ManagedByLabel = "app.kubernetes.io/managed-by"
	managedBy      = "corput-control-plane"

	keyFormat     = "format"
	keyOrigin     = "origin"
	keyAssignment = "assignment.json"
	keyFleet      = "fleet.json"
)

// kubeWriteTimeout bounds one request of the state store.
const kubeWriteTimeout = 10 * time.Second

// kubeStore keeps the state in ConfigMaps of one namespace, labelled
// StateLabel=name: one per origin (objectName) and one for the fleet
// positions (name-fleet), so that no object nears the API's 1 MiB limit
// (800 endpoints are about 60 KB). It is the leader's store; followers
// read the same objects (kubeFollower).
//
// Invariants:
//   - Every write carries the resourceVersion this store last read or
//     wrote for its object (optimistic concurrency): when another writer
//     changed the object since, the API refuses it (409), the store reads
//     the object again and returns the error, and the writer publishes
//     nothing and writes again later — its own state, over the other's
//     (the leader's state wins; followers and gateways follow the object).
//   - Only what differs from the object as last read or written is sent:
//     an unchanged origin costs no request.
//   - Before every request the fence is asked: a replica whose Lease may
//     have passed to another writes nothing.
type kubeStore struct {
	client   kubernetes.Interface
	ns, name string
	fence    func() error // nil error: the write may go
	log      *slog.Logger
	metrics  *Metrics

	mu      sync.Mutex
	objects map[string]*corev1.ConfigMap // by object name: as last read or written
}

func newKubeStore(client kubernetes.Interface, ns, name string, fence func() error, log *slog.Logger, m *Metrics) *kubeStore {
	return &kubeStore{client: client, ns: ns, name: name, fence: fence, log: log, metrics: m, objects: map[string]*corev1.ConfigMap{}}
}

func (s *kubeStore) String() string { return "kubernetes configmaps " + s.ns + "/" + s.name + "-*" }
func (s *kubeStore) close()         {}

// selector selects the state's objects.
func (s *kubeStore) selector() string { return StateLabel + "=" + s.name }

// fleetObject is the fleet positions' object's name.
func (s *kubeStore) fleetObject() string { return s.name + "-fleet" }

// objectName names an origin's object: the state's name, "-origin-", the
// origin's name made a DNS label (lower case, other characters '-'),
// and a hash of the exact name, so that names that differ only in case
// or punctuation get objects of their own.
func (s *kubeStore) objectName(origin string) string {
	h := fnv.New32a()
	h.Write([]byte(origin))
	slug := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, origin)
	prefix := s.name + "-origin-"
	slug = strings.Trim(slug[:min(len(slug), validation.DNS1123SubdomainMaxLength-len(prefix)-10)], "-")
	if slug != "" {
		slug += "-"
	}
	return fmt.Sprintf("%s%s%08x", prefix, slug, h.Sum32())
}

// load reads the state with a fresh (quorum) list: every origin's
// assignment and the fleet positions, and remembers each object's
// resourceVersion. A damaged object is an error: the leader must not
// start over on it and reshuffle the fleet.
func (s *kubeStore) load(ctx context.Context) (*State, error) {
	ctx, cancel := context.WithTimeout(ctx, kubeWriteTimeout)
	defer cancel()
	list, err := s.client.CoreV1().ConfigMaps(s.ns).List(ctx, metav1.ListOptions{LabelSelector: s.selector()})
	if err != nil {
		return nil, fmt.Errorf("state %s: list: %w", s, err)
	}
	st, err := stateOf(s.name, list.Items)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects = map[string]*corev1.ConfigMap{}
	for i := range list.Items {
		s.objects[list.Items[i].Name] = &list.Items[i]
	}
	return st, nil
}

// stateOf decodes the state's objects; fleetName's is the fleet's.
func stateOf(name string, items []corev1.ConfigMap) (*State, error) {
	st := NewState()
	var errs []error
	for _, cm := range items {
		if f := cm.Data[keyFormat]; f != fmt.Sprint(StateFormat) {
			errs = append(errs, fmt.Errorf("configmap %s/%s: format %q; this corput reads format %d", cm.Namespace, cm.Name, f, StateFormat))
			continue
		}
		if cm.Name == name+"-fleet" {
			var slots []string
			if err := strictJSON(cm.Data[keyFleet], &slots); err != nil {
				errs = append(errs, fmt.Errorf("configmap %s/%s: %s: %w", cm.Namespace, cm.Name, keyFleet, err))
			} else if err := validateFleet(slots); err != nil {
				errs = append(errs, fmt.Errorf("configmap %s/%s: %w", cm.Namespace, cm.Name, err))
			} else if len(slots) > 0 {
				st.Fleet = slots
			}
			continue
		}
		origin := cm.Data[keyOrigin]
		a := &Assignment{}
		if err := strictJSON(cm.Data[keyAssignment], a); err != nil {
			errs = append(errs, fmt.Errorf("configmap %s/%s: %s: %w", cm.Namespace, cm.Name, keyAssignment, err))
			continue
		}
		if err := checkName(origin); err != nil {
			errs = append(errs, fmt.Errorf("configmap %s/%s: %s: %w", cm.Namespace, cm.Name, keyOrigin, err))
			continue
		}
		if err := a.validate(); err != nil {
			errs = append(errs, fmt.Errorf("configmap %s/%s: origin %q: %w", cm.Namespace, cm.Name, origin, err))
			continue
		}
		if _, dup := st.Origins[origin]; dup {
			errs = append(errs, fmt.Errorf("configmap %s/%s: origin %q has a second object", cm.Namespace, cm.Name, origin))
			continue
		}
		st.Origins[origin] = a
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("state in the Kubernetes API is damaged; fix or delete the objects named (a deleted origin's object starts it afresh, reshuffling it): %w", err)
	}
	return st, nil
}

func strictJSON(data string, v any) error {
	dec := json.NewDecoder(strings.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the value")
	}
	return nil
}

// write persists st: the objects whose content differs from what was
// last read or written are updated (or created), and origins no longer in
// st are deleted. It stops at the first error, and reports whether it sent
// any write.
func (s *kubeStore) write(st *State) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[string]map[string]string{s.fleetObject(): s.fleetData(st.Fleet)}
	for origin, a := range st.Origins {
		data, err := s.originData(origin, a)
		if err != nil {
			return false, err
		}
		want[s.objectName(origin)] = data
	}
	wrote := false
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if cm := s.objects[name]; cm != nil && maps.Equal(cm.Data, want[name]) {
			continue
		}
		if err := s.putLocked(name, want[name]); err != nil {
			return wrote, err
		}
		wrote = true
	}
	for _, name := range slices.Sorted(maps.Keys(s.objects)) {
		if _, ok := want[name]; !ok {
			if err := s.deleteLocked(name); err != nil {
				return wrote, err
			}
			wrote = true
		}
	}
	return wrote, nil
}

func (s *kubeStore) fleetData(slots []string) map[string]string {
	if slots == nil {
		slots = []string{}
	}
	b, _ := json.Marshal(slots)
	return map[string]string{keyFormat: fmt.Sprint(StateFormat), keyFleet: string(b)}
}

func (s *kubeStore) originData(origin string, a *Assignment) (map[string]string, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	return map[string]string{keyFormat: fmt.Sprint(StateFormat), keyOrigin: origin, keyAssignment: string(b)}, nil
}

// putLocked updates object name to data with the resourceVersion last
// seen, or creates it when none was seen.
func (s *kubeStore) putLocked(name string, data map[string]string) error {
	if err := s.fence(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), kubeWriteTimeout)
	defer cancel()
	api := s.client.CoreV1().ConfigMaps(s.ns)
	cur := s.objects[name]
	var got *corev1.ConfigMap
	var err error
	if cur == nil {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns,
			Labels: map[string]string{StateLabel: s.name, ManagedByLabel: managedBy}}, Data: data}
		got, err = api.Create(ctx, cm, metav1.CreateOptions{})
	} else {
		cm := cur.DeepCopy()
		cm.Data = data
		got, err = api.Update(ctx, cm, metav1.UpdateOptions{})
	}
	switch {
	case err == nil:
		s.objects[name] = got
		return nil
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err):
		s.metrics.StateConflicts.Inc()
		s.refreshLocked(ctx, name)
		return fmt.Errorf("state %s: %s changed under this writer (%w); it is read again and written over", s, name, err)
	default:
		return fmt.Errorf("state %s: write %s: %w", s, name, err)
	}
}

// deleteLocked deletes object name, if it is still as last seen.
func (s *kubeStore) deleteLocked(name string) error {
	if err := s.fence(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), kubeWriteTimeout)
	defer cancel()
	rv := s.objects[name].ResourceVersion
	err := s.client.CoreV1().ConfigMaps(s.ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	switch {
	case err == nil || apierrors.IsNotFound(err):
		delete(s.objects, name)
		return nil
	case apierrors.IsConflict(err):
		s.metrics.StateConflicts.Inc()
		s.refreshLocked(ctx, name)
		return fmt.Errorf("state %s: %s changed under this writer (%w); it is read again", s, name, err)
	default:
		return fmt.Errorf("state %s: delete %s: %w", s, name, err)
	}
}

// refreshLocked reads object name again after a conflict (absent: forgets it).
func (s *kubeStore) refreshLocked(ctx context.Context, name string) {
	cm, err := s.client.CoreV1().ConfigMaps(s.ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		s.objects[name] = cm
	case apierrors.IsNotFound(err):
		delete(s.objects, name)
	default:
		s.log.Warn("control plane: cannot read a state object again after a conflict; the next write tries again", "object", name, "err", err)
	}
}

// observe is told of a state object as the watch sees it: one another
// writer changed since this store last wrote it (a newer resourceVersion,
// other content) is taken as the current object, and reported, so that
// the next write puts this store's content back over it.
func (s *kubeStore) observe(cm *corev1.ConfigMap, deleted bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.objects[cm.Name]
	switch {
	case deleted && cur != nil && cur.ResourceVersion == cm.ResourceVersion:
		delete(s.objects, cm.Name)
		return true
	case deleted || cur == nil:
		return false // created by another writer, or gone: the next write decides
	case cur.ResourceVersion == cm.ResourceVersion || maps.Equal(cur.Data, cm.Data) || olderVersion(cm.ResourceVersion, cur.ResourceVersion):
		return false
	}
	s.objects[cm.Name] = cm.DeepCopy()
	return true
}

// olderVersion reports whether resourceVersion a is older than b. They are
// opaque to clients but etcd's are numbers; a version that is not one is
// taken as newer, which only costs a write.
func olderVersion(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return bytes.Compare([]byte(a), []byte(b)) < 0
}
