package proc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// A process tree here is a child's process group: Start makes every child
// lead its own (Attr), so nginx's workers, HAProxy's threads and anything
// a proxy forks are in it. Its figures are read from /proc (Linux only;
// elsewhere they fail).

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat
// (100 on every Linux architecture Go supports).
const ClockTicks = 100

// Usage is a process group's resident memory and CPU time now.
type Usage struct {
	Procs    int
	RSSBytes int64 // sum of the members' resident set sizes
	CPUTicks int64 // sum of the members' utime + stime, in ClockTicks
}

// ReadGroup sums every process of group pgid: RSS from /proc/PID/statm
// (resident pages × the page size), CPU from /proc/PID/stat. A process
// that exits during the scan is skipped.
func ReadGroup(pgid int) (Usage, error) {
	var u Usage
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return u, err
	}
	page := int64(os.Getpagesize())
	for _, d := range dirs {
		st, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		f, ok := parseStat(st)
		if !ok || f.pgrp != pgid {
			continue
		}
		sm, err := os.ReadFile(filepath.Join(d, "statm"))
		if err != nil {
			continue
		}
		fs := bytes.Fields(sm)
		if len(fs) < 2 {
			continue
		}
		res, err := strconv.ParseInt(string(fs[1]), 10, 64)
		if err != nil {
			continue
		}
		u.Procs++
		u.RSSBytes += res * page
		u.CPUTicks += f.utime + f.stime
	}
	if u.Procs == 0 {
		return u, fmt.Errorf("no process in group %d under /proc", pgid)
	}
	return u, nil
}

// CPU is u's CPU time.
func (u Usage) CPU() time.Duration { return time.Duration(u.CPUTicks) * time.Second / ClockTicks }

// GroupCPU is the user + system CPU time of every process in the process
// group pgid (ReadGroup): nginx's workers count with their master. A
// process that already exited is not counted (none of the proxies' do
// while they run).
func GroupCPU(pgid int) time.Duration {
	u, _ := ReadGroup(pgid)
	return u.CPU()
}

// statFields are the fields of /proc/PID/stat that ReadGroup uses.
type statFields struct {
	pgrp         int
	utime, stime int64
}

// parseStat reads pgrp (field 5), utime (14) and stime (15) of a
// /proc/PID/stat line; the command (field 2) is in parentheses and may
// hold spaces, so fields count from its closing one.
func parseStat(b []byte) (statFields, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return statFields{}, false
	}
	fs := bytes.Fields(b[i+1:]) // fs[0] is field 3, the state
	if len(fs) < 13 {
		return statFields{}, false
	}
	pgrp, err1 := strconv.Atoi(string(fs[2]))
	ut, err2 := strconv.ParseInt(string(fs[11]), 10, 64)
	st, err3 := strconv.ParseInt(string(fs[12]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return statFields{}, false
	}
	return statFields{pgrp: pgrp, utime: ut, stime: st}, true
}
