// Package procid tells whether the process that created something (a
// container, a temporary directory) still runs: a pid and the process's
// start time identify it even after the pid is reused.
package procid

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Start returns the start time of process pid (field 22 of /proc/pid/stat),
// or "" where /proc is not available.
func Start(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// Alive reports whether the process pid, started at start ("" if unknown),
// still runs on this host.
func Alive(pid int, start string) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && err != syscall.EPERM {
		return false
	}
	if start != "" {
		if now := Start(pid); now != "" && now != start {
			return false // the pid was reused
		}
	}
	return true
}
