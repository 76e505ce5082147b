package origin

import (
	"io"
	"net/http"
	"net/url"
	"testing"
)

// discardWriter is a ResponseWriter that reuses one header map, so the
// benchmark counts the handler's allocations only.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

func benchHandler(b *testing.B, path string, o Options) {
	s, err := newServer(o)
	if err != nil {
		b.Fatal(err)
	}
	r := &http.Request{Method: "GET", URL: &url.URL{Path: path}}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		s.ServeHTTP(w, r)
	}
}

// BenchmarkHandlerRaw is the raw profile's request path without the socket.
func BenchmarkHandlerRaw(b *testing.B) {
	benchHandler(b, "/", Options{ID: "o1", ErrorRate: 0.01})
}

// BenchmarkHandlerClass is a class request that waits for a worker and a
// (1 ns) service time.
func BenchmarkHandlerClass(b *testing.B) {
	benchHandler(b, "/api/light", Options{Workers: 8, Classes: tiny(1, 2)})
}

// BenchmarkLoopbackRaw is end-to-end HTTP/1.1 keep-alive requests to a raw
// origin on 127.0.0.1, client included.
func BenchmarkLoopbackRaw(b *testing.B) {
	s, err := Start(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	url := s.URL() + "/"
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
