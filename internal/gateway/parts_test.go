package gateway

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestRouterLongestPrefixAndHostPrecedence(t *testing.T) {
	r := NewRouter([]Route{
		{Host: "", PathPrefix: "/", Origin: "default"},
		{Host: "", PathPrefix: "/api/", Origin: "api"},
		{Host: "", PathPrefix: "/api/pay", Origin: "payments"},
		{Host: "Shop.Example.com", PathPrefix: "/", Origin: "shop"},
		{Host: "*.example.com", PathPrefix: "/", Origin: "wild"},
		{Host: "*.eu.example.com", PathPrefix: "/", Origin: "eu"},
	})
	for _, c := range []struct{ host, path, want string }{
		{"x.test", "/", "default"},
		{"x.test", "/api/users", "api"},
		{"x.test", "/api/payments/1", "payments"},
		{"shop.example.com:8080", "/api/users", "shop"},
		{"SHOP.example.com", "/", "shop"},
		{"a.example.com", "/", "wild"},
		{"a.eu.example.com", "/", "eu"},
		{"example.com", "/", "default"},
	} {
		got, ok := r.Match(c.host, c.path)
		if !ok || got != c.want {
			t.Errorf("Match(%q, %q) = %q, %v; want %q", c.host, c.path, got, ok, c.want)
		}
	}
	if _, ok := NewRouter([]Route{{Host: "a", PathPrefix: "/x", Origin: "o"}}).Match("b", "/x"); ok {
		t.Error("unmatched host routed")
	}
}

func TestRemoveHopHeaders(t *testing.T) {
	h := http.Header{
		"Connection":        {"keep-alive, X-Secret"},
		"X-Secret":          {"1"},
		"Keep-Alive":        {"timeout=5"},
		"Transfer-Encoding": {"chunked"},
		"Te":                {"trailers"},
		"Proxy-Connection":  {"keep-alive"},
		"X-Keep":            {"yes"},
	}
	removeHopHeaders(h, "")
	for _, k := range []string{"Connection", "X-Secret", "Keep-Alive", "Transfer-Encoding", "Proxy-Connection"} {
		if _, ok := h[k]; ok {
			t.Errorf("%s survived", k)
		}
	}
	if h.Get("Te") != "trailers" || h.Get("X-Keep") != "yes" {
		t.Errorf("end-to-end headers lost: %v", h)
	}
	h = http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}
	up := upgradeType(h)
	removeHopHeaders(h, up)
	if up != "websocket" || h.Get("Upgrade") != "websocket" || h.Get("Connection") != "Upgrade" {
		t.Errorf("upgrade headers: %q %v", up, h)
	}
}

func TestForwardingTrust(t *testing.T) {
	f := Forwarding{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	h := http.Header{"X-Forwarded-For": {"1.2.3.4"}, "X-Forwarded-Proto": {"https"}}
	f.Apply(h, "192.0.2.7:5555", "shop.example", false)
	if got := h.Get("X-Forwarded-For"); got != "192.0.2.7" {
		t.Errorf("untrusted peer: XFF %q, want only the peer", got)
	}
	if h.Get("X-Forwarded-Proto") != "http" || h.Get("X-Forwarded-Host") != "shop.example" {
		t.Errorf("untrusted peer: %v", h)
	}
	h = http.Header{"X-Forwarded-For": {"1.2.3.4"}, "X-Forwarded-Proto": {"https"}}
	f.Apply(h, "10.1.2.3:5555", "shop.example", false)
	if got := h.Get("X-Forwarded-For"); got != "1.2.3.4, 10.1.2.3" {
		t.Errorf("trusted peer: XFF %q", got)
	}
	if h.Get("X-Forwarded-Proto") != "https" {
		t.Errorf("trusted peer's proto replaced: %v", h)
	}
}
