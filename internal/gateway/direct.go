package gateway

import (
	"net/http"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/route"
)

// directOf sets rt's own answer from r's redirect or answer
// (routes[].redirect, routes[].answer; package proxy writes them).
func directOf(rt *route.Route, r *config.Route) {
	if rd := r.Redirect; rd != nil {
		rt.Redirect = &route.Redirect{
			Scheme: rd.Scheme, Host: rd.Host, Port: rd.Port, Path: rd.Path,
			Prefix: rd.Prefix, PrefixSet: rd.Prefix != "", StripQuery: rd.StripQuery, Status: rd.RedirectStatus(),
		}
	}
	if a := r.Answer; a != nil {
		ans := &route.Answer{Status: a.Status, Body: a.Body}
		if ct := a.AnswerContentType(); ct != "" {
			ans.Fields = append(ans.Fields, [2]string{"Content-Type", ct})
		}
		for _, h := range a.Headers {
			ans.Fields = append(ans.Fields, [2]string{http.CanonicalHeaderKey(h.Name), h.Value})
		}
		rt.Answer = ans
	}
}
