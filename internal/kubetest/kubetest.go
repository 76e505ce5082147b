// Package kubetest runs, in tests, a real Kubernetes API server: Debian's
// etcd and a kube-apiserver built from the Go module proxy
// (tools/kube-apiserver/build.sh), both on free loopback ports in a
// temporary directory, with token authentication, RBAC and
// service-account keys generated at start (docs/control-plane.md,
// "Tested against a real API server").
//
// One server serves a whole test binary: Shared starts it on first use,
// and M stops it and removes its directory once the tests have run
// (TestMain(m) { os.Exit(kubetest.M(m).Run()) }). Tests isolate
// themselves by namespace (Namespace).
//
// Invariants:
//   - Where a binary is missing, Shared skips the test and names the one
//     command that provides it; with CI=true in the environment a missing
//     binary fails the test instead, so CI cannot pass without running
//     these tests.
//   - The children die with the test binary (Pdeathsig), and Stop leaves
//     no process and no file behind.
//   - No controller runs (no kube-controller-manager, no scheduler): what
//     a controller would write, a test writes itself (an EndpointSlice's
//     endpoints, a pod's binding).
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/corput/corput/internal/testbin"
)

// Version is the kube-apiserver release tools/kube-apiserver builds.
const Version = "v1.37.2"

// The environment variables that name the binaries; unset, the
// kube-apiserver is looked for where tools/kube-apiserver/build.sh puts it
// and etcd on the PATH.
const (
	EnvAPIServer = "CORPUT_KUBE_APISERVER"
	EnvEtcd      = "CORPUT_ETCD"
)

// Provide is the one command that provides the binaries, run from the
// repository's root.
const Provide = "apt-get install -y etcd-server && tools/kube-apiserver/build.sh"

// Server is a running etcd and kube-apiserver.
type Server struct {
	// Config reaches the API server as an administrator (group
	// system:masters) over TLS, verifying the server's certificate.
	Config *rest.Config
	// Client is a clientset on Config.
	Client kubernetes.Interface
	// URL is the API server's https://127.0.0.1:PORT.
	URL string
	// Kubeconfig is a kubeconfig file for Config, for child processes.
	Kubeconfig string

	dir             string
	etcd, apiserver *exec.Cmd
	etcdLog, apiLog *bytes.Buffer
	token           string
	caFile          string
}

// APIServerPath is where the kube-apiserver binary is looked for: $CORPUT_KUBE_APISERVER,
// else ${XDG_CACHE_HOME:-$HOME/.cache}/corput/kube-apiserver-v1.37.2/kube-apiserver.
func APIServerPath() string {
	if p := os.Getenv(EnvAPIServer); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "corput", "kube-apiserver-"+Version, "kube-apiserver")
}

// EtcdPath is where etcd is looked for: $CORPUT_ETCD, else etcd on the PATH.
func EtcdPath() string {
	if p := os.Getenv(EnvEtcd); p != "" {
		return p
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p
	}
	return "/usr/bin/etcd"
}

// missing lists the binaries that are not there.
func missing() []string {
	var out []string
	for _, p := range []string{APIServerPath(), EtcdPath()} {
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			out = append(out, p)
		}
	}
	return out
}

var (
	shared    *Server
	sharedErr error
	sharedMu  sync.Mutex
)

// Shared returns the test binary's API server, starting it on first use.
// Where a binary is missing it skips t (fails it when CI=true); a server
// that does not start fails t.
func Shared(t testing.TB) *Server {
	t.Helper()
	if m := missing(); len(m) > 0 {
		msg := fmt.Sprintf("needs a real Kubernetes API server: %s not found; provide them with: %s",
			strings.Join(m, " and "), Provide)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: a missing binary fails the run)")
		}
		t.Skip(msg)
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = Start()
	}
	if sharedErr != nil {
		t.Fatalf("kubetest: %v", sharedErr)
	}
	return shared
}

// Runner is what a TestMain runs: *testing.M (testbin's Runner).
type Runner = testbin.Runner

// M wraps a TestMain's m so that the shared server is stopped once the
// tests have run.
func M(m Runner) Runner { return stopping{m} }

type stopping struct{ m Runner }

func (s stopping) Run() int {
	code := s.m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Stop()
		shared = nil
	}
	return code
}

// Start starts etcd and kube-apiserver in a new temporary directory and
// waits until the API server answers /readyz.
func Start() (*Server, error) {
	dir, err := os.MkdirTemp("", "kubetest")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, etcdLog: &bytes.Buffer{}, apiLog: &bytes.Buffer{}}
	if err := s.start(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s.etcd = child(EtcdPath(), s.etcdLog,
		"--name", "kubetest", "--data-dir", filepath.Join(s.dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "kubetest="+peerURL, "--log-level", "warn")
	if err := s.etcd.Start(); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	s.token = randomHex(16)
	tokens := filepath.Join(s.dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(s.token+`,kubetest-admin,kubetest-admin,"system:masters"`+"\n"), 0o600); err != nil {
		return err
	}
	saKey, saPub := filepath.Join(s.dir, "sa.key"), filepath.Join(s.dir, "sa.pub")
	if err := writeKeyPair(saKey, saPub); err != nil {
		return err
	}
	certDir := filepath.Join(s.dir, "certs")
	s.URL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	s.apiserver = child(APIServerPath(), s.apiLog,
		"--etcd-servers="+etcdURL, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ports[2]), "--cert-dir="+certDir,
		"--token-auth-file="+tokens, "--authorization-mode=RBAC",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.0.0.0/24", "--endpoint-reconciler-type=none")
	if err := s.apiserver.Start(); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	if err := s.awaitReady(90 * time.Second); err != nil {
		return err
	}
	s.Config = &rest.Config{Host: s.URL, BearerToken: s.token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: s.caFile}, QPS: -1}
	if s.Client, err = kubernetes.NewForConfig(s.Config); err != nil {
		return err
	}
	s.Kubeconfig = filepath.Join(s.dir, "kubeconfig")
	return os.WriteFile(s.Kubeconfig, []byte(s.kubeconfig("", nil)), 0o600)
}

// awaitReady polls /readyz until it answers 200, then finds the serving
// certificate kube-apiserver generated in its cert dir.
func (s *Server) awaitReady(d time.Duration) error {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	deadline := time.Now().Add(d)
	for {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+s.token)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if exited(s.etcd) || exited(s.apiserver) || time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready after %v (last: %v)\netcd log:\n%s\nkube-apiserver log:\n%s",
				d, err, tail(s.etcdLog), tail(s.apiLog))
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.caFile = filepath.Join(s.dir, "certs", "apiserver.crt")
	if _, err := os.Stat(s.caFile); err != nil {
		return fmt.Errorf("kube-apiserver's serving certificate: %w", err)
	}
	return nil
}

// Stop stops kube-apiserver, then etcd, and removes the directory.
func (s *Server) Stop() {
	for _, c := range []*exec.Cmd{s.apiserver, s.etcd} {
		if c == nil || c.Process == nil {
			continue
		}
		_ = c.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(s.dir)
}

// As returns a config that acts as user in groups (impersonation by the
// administrator): RBAC decides what it may do, as it would for that
// user's own credentials.
func (s *Server) As(user string, groups ...string) *rest.Config {
	c := rest.CopyConfig(s.Config)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return c
}

// KubeconfigAs writes a kubeconfig file that acts as user in groups,
// for a child process, in dir.
func (s *Server) KubeconfigAs(dir, user string, groups ...string) (string, error) {
	p := filepath.Join(dir, "kubeconfig-"+strings.NewReplacer(":", "_", "/", "_").Replace(user))
	return p, os.WriteFile(p, []byte(s.kubeconfig(user, groups)), 0o600)
}

func (s *Server) kubeconfig(user string, groups []string) string {
	as := ""
	if user != "" {
		as = "\n    as: " + quote(user)
		if len(groups) > 0 {
			as += "\n    as-groups:"
			for _, g := range groups {
				as += "\n      - " + quote(g)
			}
		}
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
  - name: kubetest
    cluster: {server: %s, certificate-authority: %s}
users:
  - name: kubetest
    user:
      token: %s%s
contexts:
  - name: kubetest
    context: {cluster: kubetest, user: kubetest}
current-context: kubetest
`, s.URL, quote(s.caFile), s.token, as)
}

func quote(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }

// Namespace creates a namespace of its own for t (the name starts with
// prefix) and returns its name. Nothing removes it: with no namespace
// controller a deleted namespace would stay terminating, and the server
// goes away with the test binary.
func (s *Server) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	got, err := s.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: create namespace: %v", err)
	}
	return got.Name
}

// APIServerPID is the kube-apiserver's process id (for measuring it).
func (s *Server) APIServerPID() int { return s.apiserver.Process.Pid }

// child is a command whose output goes to log and that dies with the
// test binary.
func child(path string, log *bytes.Buffer, args ...string) *exec.Cmd {
	c := exec.Command(path, args...)
	w := &lockedWriter{b: log}
	c.Stdout, c.Stderr = w, w
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return c
}

// lockedWriter keeps the last 64 KiB of a child's output.
type lockedWriter struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if w.b.Len() > 64<<10 {
		rest := bytes.Clone(w.b.Bytes()[w.b.Len()-32<<10:])
		w.b.Reset()
		w.b.Write(rest)
	}
	return len(p), nil
}

func tail(b *bytes.Buffer) string {
	s := b.String()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

func exited(c *exec.Cmd) bool {
	if c == nil || c.Process == nil {
		return true
	}
	return c.Process.Signal(syscall.Signal(0)) != nil
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var out []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// writeKeyPair writes a fresh RSA key (PKCS#1 PEM) and its public key
// (PKIX PEM): the service-account signing pair.
func writeKeyPair(keyPath, pubPath string) error {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return err
	}
	return errors.Join(
		os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), 0o600),
		os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600))
}

// insecureTLS is for the /readyz polls before the serving certificate is
// known (kube-apiserver writes it at start).
func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } //nolint:gosec // loopback, before the certificate exists
