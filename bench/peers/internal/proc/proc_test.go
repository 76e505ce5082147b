package proc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStopEndsTheWholeGroup: a child's own children die with it.
func TestStopEndsTheWholeGroup(t *testing.T) {
	ps := New(t.TempDir())
	c, err := ps.Start("sh", nil, "sh", "-c", "sleep 60 & echo started; sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	pgid := c.Pgid()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.WaitLog(ctx, regexp.MustCompile(`listening on`)); err == nil {
		t.Fatal("WaitLog matched a line that is not there")
	}
	if m, err := c.WaitLog(context.Background(), regexp.MustCompile(`^(started)$`)); err != nil || m[1] != "started" {
		t.Fatalf("WaitLog = %v, %v", m, err)
	}
	if n := liveInGroup(t, pgid); n != 3 {
		t.Fatalf("%d live processes in the group before stop, want 3 (sh and two sleeps)", n)
	}
	ps.StopAll()
	if n := liveInGroup(t, pgid); n != 0 {
		t.Fatalf("%d processes of group %d still running after StopAll", n, pgid)
	}
	if len(ps.live) != 0 {
		t.Fatalf("%d children still tracked", len(ps.live))
	}
}

// liveInGroup counts the processes of group pgid that are not zombies
// (an orphan's zombie waits for a reaper this test does not control).
func liveInGroup(t *testing.T, pgid int) int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		t.Skip("no /proc")
	}
	n := 0
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so read
		// after its closing parenthesis.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			n++
		}
	}
	return n
}

func TestParseStat(t *testing.T) {
	// The command may hold spaces and parentheses: fields count from the
	// last ')'.
	line := []byte("4242 (a) b (c) S 1 4200 4200 0 -1 4194560 100 0 0 0 731 215 0 0 20 0 3 0 12345 1000 50\n")
	f, ok := parseStat(line)
	if !ok || f.pgrp != 4200 || f.utime != 731 || f.stime != 215 {
		t.Errorf("parseStat = %+v, %v; want pgrp 4200, utime 731, stime 215", f, ok)
	}
	if _, ok := parseStat([]byte("4242 (cut")); ok {
		t.Error("a line without its closing parenthesis parsed")
	}
}

func TestReadGroupSeesThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/statm"); err != nil {
		t.Skip("no /proc")
	}
	u, err := ReadGroup(syscall.Getpgrp())
	if err != nil {
		t.Fatal(err)
	}
	if u.Procs < 1 || u.RSSBytes < 1<<20 {
		t.Errorf("own group: %+v; want this process with more than 1 MiB resident", u)
	}
	if _, err := ReadGroup(1 << 30); err == nil {
		t.Error("a group nobody is in read without error")
	}
}

// GroupCPU reads a process group's CPU: a child that spins in a group of
// its own (as the proxies run: Attr) shows its time growing. The test
// binary's own group would not do: under go test ./... it holds the other
// packages' test binaries too, and one that exits between the two
// readings takes its time with it.
func TestGroupCPUCountsAProcessGroup(t *testing.T) {
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	cmd.SysProcAttr = Attr()
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	pgid := cmd.Process.Pid
	before := GroupCPU(pgid)
	var after time.Duration
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if after = GroupCPU(pgid); after > before {
			return
		}
	}
	t.Errorf("CPU of the spinning child's process group stayed at %v (from %v) for 10 s", after, before)
}
