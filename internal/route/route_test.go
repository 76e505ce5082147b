package route

import (
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
