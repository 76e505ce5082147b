package h2

import (
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
)

// TestFieldsDecodeAsSent: the encoder's blocks decode with x/net's HPACK
// decoder to the fields given, names lowered, the forbidden ones left out;
// lengths past the 7-bit prefix and names longer than the lowering buffer
// included.
func TestFieldsDecodeAsSent(t *testing.T) {
	var f Fields
	long := strings.Repeat("v", 300)
	longName := "X-" + strings.Repeat("N", 100)
	f.Pseudo("PATCH", "https", "example.test:8443", "/a?b=c")
	f.Add("Content-Type", "text/plain")
	f.Add("X-Long", long)
	f.Add(longName, "1")
	f.Add("Host", "dropped")
	f.Add("Transfer-Encoding", "chunked")
	f.Add("TE", "gzip")
	f.Add("te", "trailers")
	var got []hpack.HeaderField
	d := hpack.NewDecoder(4096, func(hf hpack.HeaderField) { got = append(got, hf) })
	if _, err := d.Write(f.b); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	want := []hpack.HeaderField{
		{Name: ":method", Value: "PATCH"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: "example.test:8443"}, {Name: ":path", Value: "/a?b=c"},
		{Name: "content-type", Value: "text/plain"}, {Name: "x-long", Value: long},
		{Name: strings.ToLower(longName), Value: "1"}, {Name: "te", Value: "trailers"},
	}
	if len(got) != len(want) {
		t.Fatalf("decoded %v\nwant %v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Value != want[i].Value {
			t.Fatalf("field %d: %v, want %v", i, got[i], want[i])
		}
	}
	if _, err := d.Write([]byte{0x80 | 62}); err == nil { // the first dynamic entry
		t.Fatal("the origin's dynamic table has an entry: the encoder indexed a field")
	}
	if testing.AllocsPerRun(100, func() {
		f.Reset()
		f.Pseudo("GET", "http", "h", "/")
		f.Add("User-Agent", "wrk")
		f.Add("X-Forwarded-For", "127.0.0.1")
	}) != 0 {
		t.Fatal("encoding a request's fields allocates")
	}
}

// FuzzReadLoop: whatever an origin sends after its SETTINGS, the
// connection never panics and a stream waiting on it ends (answered,
// failed, or at its timer).
func FuzzReadLoop(f *testing.F) {
	f.Add([]byte{0, 0, 0, 4, 1, 0, 0, 0, 0})                                            // SETTINGS ACK
	f.Add([]byte{0, 0, 4, 8, 0, 0, 0, 0, 1, 0, 0, 0, 1})                                // WINDOW_UPDATE
	f.Add([]byte{0, 0, 1, 1, 5, 0, 0, 0, 1, 0x88})                                      // HEADERS :status 200, END_STREAM
	f.Add([]byte{0, 0, 1, 1, 4, 0, 0, 0, 1, 0x88, 0, 0, 2, 0, 1, 0, 0, 0, 1, 'o', 'k'}) // HEADERS then DATA
	f.Add([]byte{0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2})                    // GOAWAY
	f.Fuzz(func(t *testing.T, b []byte) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			buf := make([]byte, 4096)
			go func() { // read whatever the client writes
				for {
					if _, err := server.Read(buf); err != nil {
						return
					}
				}
			}()
			server.Write([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0}) // SETTINGS
			server.Write(b)
			time.Sleep(10 * time.Millisecond)
		}()
		ctx, cancel := contextWithTimeout(time.Second)
		defer cancel()
		c, err := Handshake(ctx, client, Options{})
		if err != nil {
			return
		}
		defer c.Close()
		var fl Fields
		fl.Pseudo("GET", "http", "x", "/")
		s, err := c.Open(&fl, true)
		if err != nil {
			return
		}
		tm := time.NewTimer(50 * time.Millisecond)
		defer tm.Stop()
		if _, err := s.Head(Wait{Expire: tm.C}); err == nil {
			buf := make([]byte, 64)
			for {
				if _, err := s.Read(buf, Wait{Expire: tm.C}); err != nil {
					break
				}
			}
		}
		s.Release()
	})
}
