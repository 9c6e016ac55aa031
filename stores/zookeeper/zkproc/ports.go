// The ports of the process backend: picked below the kernel's ephemeral
// range, and reserved among the processes of the host that use this
// package.

package zkproc

import (
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/locklab/locklab/internal/tooling/procid"
)

// freePorts picks n distinct free loopback TCP ports and reserves them
// (release gives them back). A port is taken from below the kernel's range
// of ephemeral ports where there is room: a server connects to its peers
// again and again, and a port of that range may become the local end of
// such a connection before the server that is to listen on it binds it.
// A JVM binds its ports a second or so after it is started, a long time
// for another ensemble started meanwhile to pick the same ones: the
// reservation, a lock on the port's byte of a file every process of this
// package shares, keeps them apart.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	lo, hi := portRange()
	var ports []int
	fail := func(err error) ([]int, error) {
		release(ports)
		return nil, err
	}
	seen := map[int]bool{}
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			lo, hi = 0, 0 // the range is crowded: the kernel's picks
		}
		p := 0
		if hi > lo {
			if p = lo + rand.IntN(hi-lo); seen[p] {
				continue
			}
			seen[p] = true
			if !reserve(p) {
				continue
			}
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			if p == 0 {
				return fail(err)
			}
			release([]int{p})
			continue
		}
		if p == 0 {
			if p = l.Addr().(*net.TCPAddr).Port; !reserve(p) {
				l.Close()
				continue
			}
		}
		ls = append(ls, l)
		ports = append(ports, p)
	}
	return ports, nil
}

// portRange is the range [lo, hi) the ports are picked from: up to 12000
// ports under the ephemeral range, or lo == hi when there is no room.
func portRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low < 11000 {
		return 0, 0
	}
	return max(10000, low-12000), low
}

// reserved are the ports this process holds, and the file whose bytes
// are locked for them. The file stays open: a process's record locks go
// with the first descriptor of the file it closes.
var reserved struct {
	mu   sync.Mutex
	held map[int]bool
	f    *os.File
	open bool // an attempt to open f was made
}

// lockFile is the file whose byte p is locked by the process that holds
// port p.
func lockFile() string {
	dir := procid.ShmDir
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "locklab-zkports.lock")
}

// reserve reserves port p, or says it is held by this process or another.
// Where the file cannot be opened or locked, a reservation holds within
// this process alone.
func reserve(p int) bool {
	reserved.mu.Lock()
	defer reserved.mu.Unlock()
	if reserved.held[p] {
		return false
	}
	if !reserved.open {
		reserved.open = true
		if f, err := os.OpenFile(lockFile(), os.O_CREATE|os.O_RDWR, 0o666); err == nil {
			os.Chmod(f.Name(), 0o666) // whoever runs next, root or not
			reserved.f = f
		}
	}
	if reserved.f != nil {
		lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: int64(p), Len: 1}
		if err := syscall.FcntlFlock(reserved.f.Fd(), syscall.F_SETLK, &lk); err != nil {
			return false
		}
	}
	if reserved.held == nil {
		reserved.held = map[int]bool{}
	}
	reserved.held[p] = true
	return true
}

// release gives back ports reserved by reserve.
func release(ports []int) {
	reserved.mu.Lock()
	defer reserved.mu.Unlock()
	for _, p := range ports {
		if !reserved.held[p] {
			continue
		}
		delete(reserved.held, p)
		if reserved.f != nil {
			lk := syscall.Flock_t{Type: syscall.F_UNLCK, Whence: 0, Start: int64(p), Len: 1}
			syscall.FcntlFlock(reserved.f.Fd(), syscall.F_SETLK, &lk)
		}
	}
}
