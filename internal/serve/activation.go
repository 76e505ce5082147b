package serve

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/corput/corput/internal/gateway"
)

// Socket activation: a supervisor (systemd, with a corput.socket unit)
// opens the listening sockets and hands them to `corput serve` as file
// descriptors 3, 4, … with LISTEN_PID (the process they are for),
// LISTEN_FDS (how many) and LISTEN_FDNAMES (their names, ':'-separated).
// Two processes can hold the same socket: a new corput serve accepts from
// it while the old one drains, and no connection waits in a queue that
// closes — the rolling restart of docs/deployment.md.
//
// A socket named "listen" or "admin" (FileDescriptorName=) is that
// listener; unnamed ones are taken in order, listen first.

// firstFD is the first descriptor handed over (SD_LISTEN_FDS_START).
const firstFD = 3

// activatedListeners returns the sockets handed over to this process, if
// any, and clears the variables so that no child takes them for its own.
func activatedListeners(getenv func(string) string, unsetenv func(string) error, pid int) (gateway.Listeners, error) {
	var out gateway.Listeners
	pidStr, fdsStr, namesStr := getenv("LISTEN_PID"), getenv("LISTEN_FDS"), getenv("LISTEN_FDNAMES")
	if fdsStr == "" {
		return out, nil
	}
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		_ = unsetenv(k)
	}
	if p, err := strconv.Atoi(pidStr); err != nil || p != pid {
		return out, nil // for another process (a parent's): not ours to take
	}
	n, err := strconv.Atoi(fdsStr)
	if err != nil || n < 1 || n > 2 {
		return out, fmt.Errorf("LISTEN_FDS=%q: corput takes one or two sockets (listen, then admin)", fdsStr)
	}
	names := strings.Split(namesStr, ":")
	var unnamed []net.Listener
	for i := range n {
		fd := firstFD + i
		syscall.CloseOnExec(fd)
		f := os.NewFile(uintptr(fd), fmt.Sprintf("LISTEN_FD_%d", fd))
		ln, err := net.FileListener(f)
		f.Close() // FileListener holds its own copy
		if err != nil {
			return out, fmt.Errorf("socket activation: descriptor %d: %w (a listening TCP socket is needed)", fd, err)
		}
		name := ""
		if i < len(names) {
			name = names[i]
		}
		switch name {
		case "listen":
			out.Listen = ln
		case "admin":
			out.Admin = ln
		default:
			unnamed = append(unnamed, ln)
		}
	}
	for _, ln := range unnamed {
		switch {
		case out.Listen == nil:
			out.Listen = ln
		case out.Admin == nil:
			out.Admin = ln
		default:
			ln.Close()
		}
	}
	return out, nil
}
