// Package proxies writes the configuration of every gateway under test
// (corput, nginx, HAProxy, Caddy), starts one, and reads corput's own
// admin figures.
//
// Every proxy gets equivalent settings: keep-alive to the origins, a
// least-connections style policy, retries of refused connections on
// another origin, no active health checks (except HAProxy's on a joining
// server: it is how HAProxy learns it is up), slow start where it has it
// (corput, HAProxy), and a bounded queue where it has one (corput: 50
// pending per endpoint; HAProxy: maxconn 50 per server with a 1 s queue
// timeout; nginx OSS and Caddy have none). The scenarios' variants
// (Spread, H2Upstream, TLSUpstream, Traced) change only what their
// scenario is about.
//
// Invariants:
//   - A proxy's config is a pure function of its settings and its
//     arguments: the same call writes the same bytes, so every run of a
//     scenario starts the proxy alike.
//   - Start returns only once the proxy answered a request 200 through
//     its listener (over HTTPS, or h2c, as it is set up); a proxy that
//     does not is stopped and its log quoted in the error.
//   - Nothing here measures a load; the admin readings are corput's own
//     counters, read before and after a load by the caller.
package proxies

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/corput/corput/bench/peers/internal/certs"
	"github.com/corput/corput/bench/peers/internal/proc"
	"github.com/corput/corput/bench/peers/internal/results"
)

// A Proxy is one gateway under test.
type Proxy interface {
	// Name is the proxy's name in tables and JSON.
	Name() string
	// Bin is the executable that must be installed; "" for corput.
	Bin() string
	// Files writes the proxy's configuration for members (and joining,
	// an address that is not a member yet and joins later, "" when none)
	// into dir, listening on listen (cleartext, or HTTPS with tc's
	// certificate when tc is not nil), and returns the command line.
	Files(dir, listen string, members []string, joining string, tc *certs.Files) ([]string, error)
	// H2C reports whether the proxy's listener is set up for h2c by prior
	// knowledge (the h2 loads): it is probed with an h2c client. nginx's
	// and HAProxy's such listener speaks h2 only.
	H2C() bool
}

// A Joiner is a proxy that must be told when its joining member is up
// (corput's discovery file). The peers have it in their config from the
// start and find it up by passive (nginx, Caddy) or active (HAProxy)
// health checking.
type Joiner interface {
	Join(dir string, members []string) error
}

// launcher is how a proxy is started: its config file in dir and its
// command line.
type launcher interface {
	launch(dir string) (config string, argv []string)
}

// write writes text to the config file of l in dir and returns l's
// command line.
func write(l launcher, dir, text string) ([]string, error) {
	path, argv := l.launch(dir)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return nil, err
	}
	return argv, nil
}

// ByName returns the named proxy; corput is corput's settings, and fwd
// makes nginx and HAProxy add the X-Forwarded-For, -Proto and -Host fields
// corput and Caddy add (--forwarded-headers).
func ByName(name string, corput Corput, fwd bool) (Proxy, error) {
	switch name {
	case results.Corput:
		return corput, nil
	case results.Nginx:
		return Nginx{Fwd: fwd}, nil
	case results.HAProxy:
		return HAProxy{Fwd: fwd}, nil
	case results.Caddy:
		return Caddy{}, nil
	}
	return nil, fmt.Errorf("--proxies: unknown proxy %q: want corput, nginx, haproxy or caddy", name)
}

// Spread is p as the spread scenario runs it: corput with loops loops,
// and with h2c every proxy's listener set up for h2c by prior knowledge.
func Spread(p Proxy, loops int, h2c bool) Proxy {
	switch v := p.(type) {
	case Corput:
		v.Loops, v.Prior = loops, h2c
		return v
	case Nginx:
		v.Prior = h2c
		return v
	case HAProxy:
		v.Prior = h2c
		return v
	case Caddy:
		v.Prior = h2c
		return v
	}
	return p
}

// Start writes p's files, starts it and waits until a request through it
// (over HTTPS when tc is not nil) is answered 200. It returns the proxy's
// process and its listening address.
func Start(ctx context.Context, ps *proc.Procs, p Proxy, dir string, members []string, joining string, tc *certs.Files) (*proc.Child, string, error) {
	listen, err := proc.FreePort()
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	argv, err := p.Files(dir, listen, members, joining, tc)
	if err != nil {
		return nil, "", err
	}
	env := []string{"HOME=" + dir, "XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir}
	c, err := ps.Start(p.Name()+"-"+filepath.Base(dir), env, argv...)
	if err != nil {
		return nil, "", err
	}
	if err := c.WaitTCP(ctx, listen); err != nil {
		c.Stop(time.Second)
		return nil, "", err
	}
	if err := waitOK(ctx, c, Scheme(tc)+"://"+listen+"/", p.H2C()); err != nil {
		c.Stop(time.Second)
		return nil, "", err
	}
	return c, listen, nil
}

// Scheme is the proxies' URL scheme: https when tc is not nil.
func Scheme(tc *certs.Files) string {
	if tc != nil {
		return "https"
	}
	return "http"
}

// waitOK polls url until it answers 200, over h2c by prior knowledge
// when h2c is set; an https url's certificate is not verified (it is the
// run's throwaway one).
func waitOK(ctx context.Context, c *proc.Child, url string, h2c bool) error {
	deadline := time.Now().Add(proc.StartTimeout)
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	if h2c {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	client := &http.Client{Timeout: time.Second, Transport: tr}
	defer client.CloseIdleConnections()
	var last string
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if h2c && resp.ProtoMajor != 2 {
				return fmt.Errorf("%s answered over %s, not h2c", url, resp.Proto)
			}
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if err := c.WaitStep(ctx, deadline); err != nil {
			return fmt.Errorf("%w (last answer from %s: %s)", err, url, last)
		}
	}
}

// withJoining is members and, when not "", joining.
func withJoining(members []string, joining string) []string {
	all := append([]string{}, members...)
	if joining != "" {
		all = append(all, joining)
	}
	return all
}
