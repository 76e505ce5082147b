package forward

import (
	"os"
	"strconv"
	"testing"

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
