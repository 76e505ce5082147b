package telemetry

import (
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"strconv"
)

// AdminSource is the gateway state the admin API reads. Implementations
// return JSON-encodable snapshots; they are called on the admin listener's
// goroutines and must not block the request path.
type AdminSource interface {
	// Origins describes every origin: endpoints, weights, ejections,
	// active requests, EWMA latency, and per loop the subset and pool state.
	Origins() any
	// Subsets describes one origin's ring; ok is false for an unknown origin.
	Subsets(origin string) (v any, ok bool)
	// Ready reports whether config is applied and pools are pre-warmed.
	Ready() bool
	// Live reports whether the process can still serve: false once a
	// downstream listener has stopped accepting for good, so that an
	// orchestrator restarts it.
	Live() bool
	// ConfigView is the running configuration (secrets redacted), its
	// hash, when it was loaded, and the last refused reload.
	ConfigView() any
	// ReloadConfig reads the configuration again and applies it, or refuses it
	// whole: the status to answer (200 applied, 400 refused, 409 no file
	// to read) and the body.
	ReloadConfig() (status int, body any)
}

// AdminHandler serves the admin API of docs/contract.md: /metrics,
// /admin/origins, /admin/subsets?origin=NAME, /healthz, /readyz, and the
// dashboard at / with its own assets and JSON under /dashboard/.
func AdminHandler(m *Metrics, src AdminSource, dashboard http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	HandleProbes(mux, src.Live, src.Ready)
	// Go's profiler, as Envoy's admin has /cpuprofiler: the admin
	// listener is loopback unless configured otherwise.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /admin/origins", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, src.Origins())
	})
	mux.HandleFunc("GET /admin/config", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, src.ConfigView())
	})
	mux.HandleFunc("POST /admin/reload", func(w http.ResponseWriter, r *http.Request) {
		code, body := src.ReloadConfig()
		writeJSON(w, code, body)
	})
	mux.HandleFunc("GET /admin/subsets", func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("origin")
		if name == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "missing ?origin=NAME"})
			return
		}
		v, ok := src.Subsets(name)
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown origin " + strconv.Quote(name)})
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
	if dashboard != nil {
		mux.Handle("GET /{$}", dashboard)
		mux.Handle("GET /dashboard/", dashboard)
	}
	return mux
}

// HandleProbes serves an orchestrator's probes on mux. GET /healthz
// answers 200 "ok" while live reports true, and 503 once it reports false
// (a listener stopped accepting for good: restart the process); a nil live
// is always live. GET /readyz answers 200 "ready" while ready reports true,
// 503 "not ready" otherwise.
func HandleProbes(mux *http.ServeMux, live, ready func() bool) {
	HandleProbesWithDetail(mux, live, ready, nil)
}

// HandleProbesWithDetail is HandleProbes whose /readyz answer is followed
// by detail's lines, when detail is not nil (what an operator should know
// of a state that does not change readiness).
func HandleProbesWithDetail(mux *http.ServeMux, live, ready func() bool, detail func() string) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if live != nil && !live() {
			writeText(w, http.StatusServiceUnavailable, "not serving: a listener stopped accepting\n")
			return
		}
		writeText(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		more := ""
		if detail != nil {
			more = detail()
		}
		if !ready() {
			writeText(w, http.StatusServiceUnavailable, "not ready\n"+more)
			return
		}
		writeText(w, http.StatusOK, "ready\n"+more)
	})
}

func writeText(w http.ResponseWriter, code int, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(s))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
