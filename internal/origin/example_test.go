package origin_test

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/workload"
)

func ExampleStart() {
	srv, err := origin.Start(origin.Options{
		Workers: 2,
		Classes: []workload.Class{{Name: "light", Latency: time.Millisecond}, {Name: "heavy", Latency: 5 * time.Millisecond}},
	})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	for _, path := range []string{"/heavy", "/api/light", "/"} {
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL() + path)
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	st := srv.Stats()
	fmt.Println("connections:", st.Connections.Accepted)
	fmt.Println("heavy, light, raw:", st.Requests["heavy"].OK, st.Requests["light"].OK, st.Requests[origin.RawClass].OK)
	// Output:
	// connections: 1
	// heavy, light, raw: 1 1 1
}
