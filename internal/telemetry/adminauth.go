package telemetry

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// openAdminPaths are the admin paths anyone who reaches the listener may
// use: the scrape and the probes. Every other path, known or not, is
// protected, so that a route added to the admin API is protected without
// saying so.
var openAdminPaths = map[string]bool{"/metrics": true, "/healthz": true, "/readyz": true}

// AdminAccess says who may use the admin API's protected paths (every path
// but /metrics, /healthz and /readyz; docs/contract.md §4).
type AdminAccess struct {
	// Token is the bearer token (admin.token_file's content); "" when none
	// is configured. When set it is required on every listener, loopback
	// included.
	Token string
	// Loopback is whether the admin listener is reachable from this
	// machine only (LoopbackAddr). Without a token the protected paths are
	// served there and refused everywhere else.
	Loopback bool
}

// RefusesProtected reports whether the protected paths are refused to
// everyone: no token is configured and the listener is not on loopback.
func (a AdminAccess) RefusesProtected() bool { return a.Token == "" && !a.Loopback }

// Mode names the access for the log: "token", "loopback" (no token, on
// loopback) or "open paths only" (no token, not on loopback).
func (a AdminAccess) Mode() string {
	switch {
	case a.Token != "":
		return "token"
	case a.Loopback:
		return "loopback"
	}
	return "open paths only"
}

// LoopbackAddr reports whether a listener's address is on loopback
// (127.0.0.0/8, ::1). Every other address, the unspecified ones (0.0.0.0,
// [::]) included, and any address that is not TCP, is not.
func LoopbackAddr(addr net.Addr) bool {
	a, ok := addr.(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// The reasons a protected path is refused, in X-Corput-Error.
const (
	reasonTokenMissing       = "admin_token_missing"
	reasonTokenInvalid       = "admin_token_invalid"
	reasonTokenNotConfigured = "admin_token_not_configured"
)

// bearerRealm is the realm of the WWW-Authenticate challenge.
const bearerRealm = `Bearer realm="corput admin"`

// ProtectAdmin returns h behind a: open paths go straight to h; a protected
// path goes to h when a's token is presented (or, without a token, on
// loopback), and is refused otherwise:
//
//   - 401 with WWW-Authenticate: Bearer realm="corput admin" and
//     X-Corput-Error: admin_token_missing when a token is configured and
//     the request carries no bearer token;
//   - 401 with WWW-Authenticate: Bearer realm="corput admin",
//     error="invalid_token" and X-Corput-Error: admin_token_invalid when it
//     carries another token;
//   - 403 with X-Corput-Error: admin_token_not_configured when no token is
//     configured and the listener is not on loopback.
//
// Tokens are compared in constant time (over their SHA-256 digests, so
// that not even the length leaks), and the Authorization header is removed
// before h sees the request.
func ProtectAdmin(h http.Handler, a AdminAccess) http.Handler {
	g := &adminGuard{next: h, loopback: a.Loopback, hasToken: a.Token != ""}
	if g.hasToken {
		g.digest = sha256.Sum256([]byte(a.Token))
	}
	return g
}

type adminGuard struct {
	next     http.Handler
	hasToken bool
	digest   [sha256.Size]byte // of the token; the token itself is not kept
	loopback bool
}

func (g *adminGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if openAdminPaths[r.URL.Path] {
		g.next.ServeHTTP(w, r)
		return
	}
	switch {
	case g.hasToken:
		presented, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			refuseAdmin(w, http.StatusUnauthorized, reasonTokenMissing, bearerRealm,
				"this path needs Authorization: Bearer <the token of admin.token_file>")
			return
		}
		d := sha256.Sum256([]byte(presented))
		if subtle.ConstantTimeCompare(d[:], g.digest[:]) != 1 {
			refuseAdmin(w, http.StatusUnauthorized, reasonTokenInvalid, bearerRealm+`, error="invalid_token"`,
				"the bearer token is not the one of admin.token_file")
			return
		}
		r.Header.Del("Authorization")
	case !g.loopback:
		refuseAdmin(w, http.StatusForbidden, reasonTokenNotConfigured, "",
			"the admin listener is not on loopback and admin.token_file is not set; only /metrics, /healthz and /readyz are served")
		return
	}
	g.next.ServeHTTP(w, r)
}

// bearerToken returns the token of an Authorization header of the Bearer
// scheme (the scheme's name in any case, RFC 9110 §11.1), or false.
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.Trim(token, " \t")
	return token, token != ""
}

// refuseAdmin answers a refused protected path: the status, the reason in
// X-Corput-Error, and a text body "<status text>: <reason>: <why>".
func refuseAdmin(w http.ResponseWriter, code int, reason, challenge, why string) {
	h := w.Header()
	if challenge != "" {
		h.Set("WWW-Authenticate", challenge)
	}
	h.Set("X-Corput-Error", reason)
	h.Set("Cache-Control", "no-store")
	writeText(w, code, http.StatusText(code)+": "+reason+": "+why+"\n")
}
