package origin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// What `corput origin` prints: the line that says where it listens, the
// status line a terminal shows, and the line it stops with.

// Banner is the first line `corput origin` prints: where it listens and
// how it plays its backend.
func (s *Server) Banner() string {
	o := s.opts
	return fmt.Sprintf("listening on %s (profile %s, %s, workers %d, slowdown %g, warm-up %s, error rate %g%s)",
		s.URL(), o.Profile, o.Proto, o.Workers, o.Slowdown, o.Warmup, o.ErrorRate, listenersNote(s.Addrs()))
}

// listenersNote is the banner's tail for an origin with several
// listeners: ", 100 listeners 127.0.0.1:40100–40199".
func listenersNote(addrs []string) string {
	if len(addrs) < 2 {
		return ""
	}
	last := addrs[len(addrs)-1]
	last = last[strings.LastIndexByte(last, ':')+1:]
	return fmt.Sprintf(", %d listeners %s–%s", len(addrs), addrs[0], last)
}

// ShowStatus redraws one status line on w every second until ctx ends.
func (s *Server) ShowStatus(ctx context.Context, w io.Writer) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var prev int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st := s.Stats()
		fmt.Fprint(w, st.statusLine(prev))
		prev = st.Total().Total()
	}
}

// statusLine is the status line redrawn over the previous one, after
// prev requests had finished a second before.
func (st Stats) statusLine(prev int64) string {
	return fmt.Sprintf("\r%d open / %d accepted connections, %d req/s, in service %d (peak %d), waiting %d, warm-up %.2fx   ",
		st.Connections.Open, st.Connections.Accepted, st.Total().Total()-prev, st.Concurrency.Current, st.Concurrency.Max, st.Queued.Current, st.WarmupFactor)
}

// Summary is the line `corput origin` stops with: what it served.
func (st Stats) Summary() string {
	t := st.Total()
	return fmt.Sprintf("stopped: %d connections accepted, %d requests (%d ok, %d 500, %d cut), peak %d in service, %d waiting",
		st.Connections.Accepted, t.Total(), t.OK, t.Error, t.Canceled, st.Concurrency.Max, st.Queued.Max)
}
