// The postmaster's children, read from /proc, and the wait until they are
// gone.

package pgproc

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"
)

// proc is a process, known by its pid and start time.
type proc struct {
	pid   int
	start string
}

// children lists the processes whose parent is ppid, from /proc.
func children(ppid int) []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := stat(pid)
		if err != nil || len(st) < 20 || st[1] != strconv.Itoa(ppid) {
			continue
		}
		out = append(out, proc{pid: pid, start: st[19]})
	}
	return out
}

// stat returns the fields of /proc/pid/stat after the command name: the
// state is [0], the parent [1], the start time [19].
func stat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("malformed stat")
	}
	return strings.Fields(string(b[i+1:])), nil
}

// gone reports whether p has exited: no such process, a zombie, or its
// pid now names a later process.
func (p proc) gone() bool {
	st, err := stat(p.pid)
	if err != nil || len(st) < 20 {
		return true
	}
	return st[0] == "Z" || st[0] == "X" || st[19] != p.start
}

// waitGone polls until every process of ps has exited, or timeout passes.
func waitGone(ps []proc, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	delay := time.Millisecond
	for _, p := range ps {
		for !p.gone() && time.Now().Before(deadline) {
			time.Sleep(delay)
			delay = min(2*delay, 20*time.Millisecond)
		}
	}
}
