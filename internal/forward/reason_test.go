package forward

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/corput/corput/internal/mdtable"
)

// Every reason is in the contract's table of the gateway's errors, with
// its status and its Retry-After.
func TestEveryReasonIsInTheContract(t *testing.T) {
	doc, err := os.ReadFile("../../docs/contract.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Reasons() {
		cells, ok := mdtable.Find(string(doc), 1, "`"+r.String()+"`")
		if !ok || len(cells) < 3 {
			t.Errorf("docs/contract.md has no row for %d %s", r.Status(), r)
			continue
		}
		if cells[0] != strconv.Itoa(r.Status()) {
			t.Errorf("docs/contract.md says %s is %s; the code says %d", r, cells[0], r.Status())
		}
		if got, want := cells[2] == "yes", r.Sheds(); got != want {
			t.Errorf("docs/contract.md says Retry-After for %s is %s; the code says %v", r, cells[2], want)
		}
	}
}

func TestRawAnswerIsAWholeResponse(t *testing.T) {
	got := string(FDLimit.Raw())
	want := "HTTP/1.1 503 Service Unavailable\r\nCache-Control: no-store\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\nX-Corput-Error: fd_limit\r\nConnection: close\r\nContent-Length: 30\r\n\r\nService Unavailable: fd_limit\n"
	if got != want {
		t.Fatalf("Raw:\n%q\nwant\n%q", got, want)
	}
}

// A gRPC client's answer carries the code gRPC's HTTP mapping gives the
// reason's status, but for the gateway's time limits (DEADLINE_EXCEEDED)
// and a body over its limit (RESOURCE_EXHAUSTED).
func TestGRPCCodeOfEachReason(t *testing.T) {
	for _, c := range []struct {
		r    Reason
		want codes.Code
	}{
		{PendingFull, codes.Unavailable},
		{AcquireTimeout, codes.Unavailable}, // a shed, with Retry-After: gRPC clients may retry it
		{NoHealthy, codes.Unavailable},
		{OverCap, codes.Unavailable},
		{ConnectFailed, codes.Unavailable},
		{UpstreamTimeout, codes.DeadlineExceeded},
		{UpstreamReset, codes.Unavailable},
		{Upstream503, codes.Unavailable},
		{UpstreamHeadTooLarge, codes.Unavailable},
		{NoRoute, codes.Unimplemented},
		{BadRequest, codes.Internal},
		{UpgradeUnsupported, codes.Internal},
		{FDLimit, codes.Unavailable},
		{SLOShed, codes.Unavailable},
	} {
		if got := codes.Code(c.r.GRPCCode()); got != c.want {
			t.Errorf("%s (%d): grpc-status %d %v, want %d %v", c.r, c.r.Status(), got, got, c.want, c.want)
		}
	}
	// By status, for the reasons of any status.
	for status, want := range map[int]codes.Code{
		400: codes.Internal, 401: codes.Unauthenticated, 403: codes.PermissionDenied, 404: codes.Unimplemented,
		408: codes.DeadlineExceeded, 413: codes.ResourceExhausted, 429: codes.Unavailable, 500: codes.Unknown,
		502: codes.Unavailable, 503: codes.Unavailable, 504: codes.DeadlineExceeded, 418: codes.Unknown,
	} {
		if got := codes.Code(grpcCodeOf(status)); got != want {
			t.Errorf("status %d: grpc-status %v, want %v", status, got, want)
		}
	}
}

func TestGRPCContentTypes(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/grpc": true, "application/grpc+proto": true, "application/grpc+json": true,
		"application/grpc;charset=utf-8": true, "Application/GRPC": true,
		"application/grpc-web": false, "application/grpc-web+proto": false, "application/grpc-web-text": false,
		"application/json": false, "application/grp": false, "": false, "text/plain": false,
	} {
		if got := GRPC([]byte(ct)); got != want {
			t.Errorf("GRPC(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestGRPCFieldsOfAShed(t *testing.T) {
	var got []string
	NoHealthy.GRPCFields(func(name, value string) { got = append(got, name+": "+value) })
	want := []string{"Cache-Control: no-store", "Content-Type: application/grpc", "Grpc-Status: 14",
		"Grpc-Message: Service Unavailable: no_healthy", "Retry-After: 1", "X-Corput-Error: no_healthy"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("fields:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
