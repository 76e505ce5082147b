package gateway

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// Plain HTTP at the edge (redirect_http): a second, cleartext listener
// whose every answer is a redirect to the same host and target over
// HTTPS. It serves no route and touches no origin; its status and HTTPS
// port are read from the configuration in force at each request, so a
// reload changes them in place (its address needs a restart).

// startRedirect opens the redirect_http listener, if the configuration
// has one.
func (g *Gateway) startRedirect() error {
	rh := g.st().cfg.RedirectHTTP
	if rh == nil {
		return nil
	}
	ln, err := net.Listen("tcp", rh.Listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(g.redirect),
		ReadHeaderTimeout: g.st().cfg.Downstream.ReadHeaderTimeout,
		IdleTimeout:       g.st().cfg.Downstream.IdleTimeout,
		MaxHeaderBytes:    g.st().cfg.Downstream.MaxHeaderBytes,
	}
	g.mu.Lock()
	g.redirectSrv, g.redirectLn = srv, ln
	g.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("redirect_http listener stopped", "err", err)
		}
	}()
	g.log.Info("redirecting plain HTTP to HTTPS", "listen", ln.Addr().String(), "status", redirectStatus(rh.Status))
	return nil
}

// RedirectAddr is the redirect_http listener's address ("" for none).
func (g *Gateway) RedirectAddr() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.redirectLn == nil {
		return ""
	}
	return g.redirectLn.Addr().String()
}

func redirectStatus(s int) int {
	if s == 0 {
		return http.StatusPermanentRedirect
	}
	return s
}

// redirect answers a plain HTTP request with its HTTPS location.
func (g *Gateway) redirect(w http.ResponseWriter, r *http.Request) {
	rh := g.st().cfg.RedirectHTTP
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "" || rh == nil {
		w.Header().Set("X-Corput-Error", "bad_request")
		http.Error(w, "Bad Request: bad_request", http.StatusBadRequest)
		return
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if rh.HTTPSPort != 0 && rh.HTTPSPort != 443 {
		host += ":" + strconv.Itoa(rh.HTTPSPort)
	}
	target := r.URL.RequestURI()
	if r.URL.IsAbs() || !strings.HasPrefix(target, "/") {
		target = "/" + strings.TrimPrefix(target, "/")
	}
	w.Header().Set("Location", "https://"+host+target)
	w.WriteHeader(redirectStatus(rh.Status))
}

// closeRedirect closes the redirect listener and its connections (a
// redirect is answered at once: there is nothing to drain).
func (g *Gateway) closeRedirect() {
	g.mu.Lock()
	srv := g.redirectSrv
	g.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}
