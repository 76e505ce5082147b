package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/subset"
)

// Origin is one origin the control plane serves: its name (the EDS
// cluster name the gateways ask for), its sizing, and — from a source
// file — its membership, or the Kubernetes Services it follows.
type Origin struct {
	Name   string
	Sizing subset.Sizing
	// Endpoints is the membership, sorted by address; nil when the
	// membership comes from elsewhere (relay mode, Services).
	Endpoints []discovery.Endpoint
	// Services are the Kubernetes Services whose EndpointSlices give the
	// membership (kubesource.go); nil otherwise.
	Services []ServiceRef
}

// ServiceRef names a Kubernetes Service port whose ready endpoints serve
// an origin.
type ServiceRef struct {
	// Namespace is the Service's; "" is the control plane's own (the
	// state's namespace, or the pod's).
	Namespace string `yaml:"namespace"`
	Name      string `yaml:"name"`
	// Port is the Service port's name as the EndpointSlices carry it
	// (ports[].name); "" when the Service has one port.
	Port string `yaml:"port"`
}

func (r ServiceRef) String() string {
	s := r.Name
	if r.Namespace != "" {
		s = r.Namespace + "/" + s
	}
	if r.Port != "" {
		s += ":" + r.Port
	}
	return s
}

// sourceFile is the --source file: YAML, or JSON (which YAML reads).
type sourceFile struct {
	Origins []sourceOrigin `yaml:"origins"`
}

type sourceOrigin struct {
	Name   string `yaml:"name"`
	Subset struct {
		Size    int `yaml:"size"`
		MinSize int `yaml:"min_size"`
		MaxSize int `yaml:"max_size"`
	} `yaml:"subset"`
	Endpoints *[]sourceEndpoint `yaml:"endpoints"`
	Services  []ServiceRef      `yaml:"services"`
}

type sourceEndpoint struct {
	Address string `yaml:"address"`
	Zone    string `yaml:"zone"`
	Weight  *int   `yaml:"weight"`
}

// ParseSource reads a source file's content (name is for messages). With
// endpoints true every origin must list its endpoints (an empty list is
// an origin with none) or name the Kubernetes Services that give them;
// with false (relay mode) none may, the membership coming from the
// upstream server. Every problem is reported at once, each naming its key
// path.
func ParseSource(name string, data []byte, endpoints bool) ([]Origin, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f sourceFile
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{name}, args...)...))
	}
	seen := map[string]bool{}
	out := make([]Origin, 0, len(f.Origins))
	for i, so := range f.Origins {
		at := fmt.Sprintf("origins[%d]", i)
		if err := checkName(so.Name); err != nil {
			fail("%s.name: %v", at, err)
		} else if seen[so.Name] {
			fail("%s.name: origin %q is listed twice", at, so.Name)
		}
		seen[so.Name] = true
		z, err := sizingOf(so.Subset.Size, so.Subset.MinSize, so.Subset.MaxSize)
		if err != nil {
			fail("%s.%v", at, err)
		}
		o := Origin{Name: so.Name, Sizing: z}
		switch {
		case !endpoints && (so.Endpoints != nil || so.Services != nil):
			fail("%s.endpoints, services: not allowed in relay mode, where the upstream server gives the membership", at)
		case so.Endpoints != nil && so.Services != nil:
			fail("%s: endpoints and services both given; the membership comes from one of them", at)
		case so.Services != nil:
			o.Services = so.Services
			for j, r := range so.Services {
				for _, err := range checkService(r) {
					fail("%s.services[%d].%v", at, j, err)
				}
				if slices.Contains(so.Services[:j], r) {
					fail("%s.services[%d]: %s is listed twice", at, j, r)
				}
			}
			if len(so.Services) == 0 {
				fail("%s.services: empty; name at least one {namespace, name, port}", at)
			}
		case endpoints && so.Endpoints == nil:
			fail("%s.endpoints: missing; list the origin's endpoints (endpoints: [] for none) or name its Kubernetes services", at)
		case endpoints:
			o.Endpoints = []discovery.Endpoint{}
			addrs := map[string]bool{}
			for j, se := range *so.Endpoints {
				e := discovery.Endpoint{Address: se.Address, Zone: se.Zone, Weight: 1}
				if se.Weight != nil {
					e.Weight = *se.Weight
				}
				if err := e.Validate(); err != nil {
					fail("%s.endpoints[%d]: %v", at, j, err)
					continue
				}
				if addrs[e.Address] {
					fail("%s.endpoints[%d]: address %s is listed twice", at, j, e.Address)
					continue
				}
				addrs[e.Address] = true
				o.Endpoints = append(o.Endpoints, e)
			}
			sortEndpoints(o.Endpoints)
		}
		out = append(out, o)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// ReadSource reads and parses the source file at path.
func ReadSource(path string, endpoints bool) ([]Origin, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("source file: %w", err)
	}
	return ParseSource(path, data, endpoints)
}

// checkService checks a Service reference's names as Kubernetes would.
func checkService(r ServiceRef) []error {
	var errs []error
	for _, f := range []struct{ key, v string }{{"namespace", r.Namespace}, {"name", r.Name}, {"port", r.Port}} {
		if f.v == "" && f.key != "name" {
			continue // the control plane's namespace; the Service's only port
		}
		if f.v == "" {
			errs = append(errs, fmt.Errorf("%s: missing; name the Service's %s", f.key, f.key))
			continue
		}
		if msgs := validation.IsDNS1123Label(f.v); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a Kubernetes name: %s", f.key, f.v, strings.Join(msgs, "; ")))
		}
	}
	return errs
}

// checkName accepts any name a gateway can put in discovery.cluster: not
// empty, no white space or control characters (relayed clusters keep
// their upstream names, such as Istio's outbound|8080||payments.svc).
func checkName(n string) error {
	if n == "" {
		return errors.New("empty; name the origin (the EDS cluster name the gateways ask for)")
	}
	if strings.ContainsFunc(n, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("%q has white space or control characters", n)
	}
	return nil
}

// sizingOf is the gateway's rule (config subset.size, min_size,
// max_size): a fixed size, else the range, a bound left out taking its
// default (25–50).
func sizingOf(size, minSize, maxSize int) (subset.Sizing, error) {
	if size == 0 {
		minSize = orDefault(minSize, subset.DefaultSizing.Min)
		maxSize = orDefault(maxSize, subset.DefaultSizing.Max)
	}
	z, err := subset.NewSizing(size, minSize, maxSize)
	if err != nil {
		return subset.Sizing{}, err
	}
	return z, nil
}

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}
