// Package redisaddr reads the address of a Redis server that the harness
// does not run, as --addr and the addrs backend give it (Parse): Redis's
// servers (stores/redis/redisnode), stress mode's worker processes and the
// CLI read them alike.
package redisaddr

import (
	"net"
	"strconv"
	"strings"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/lockkit"
)

// Parse reads the address of a server the harness does not run: a
// redis:// or rediss:// URL (locklab.ParseURL: ACL user, password,
// database, TLS, timeouts), "host:port", or "password@host:port". Bad input
// is locklab.ErrInvalid.
func Parse(s string) (locklab.PoolOptions, error) {
	if strings.Contains(s, "://") {
		return locklab.ParseURL(s)
	}
	var o locklab.PoolOptions
	hostport, shown := s, s
	if i := strings.LastIndex(s, "@"); i >= 0 {
		// Messages show the address with the password masked.
		o.Password, hostport, shown = s[:i], s[i+1:], "xxxxx"+s[i:]
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return o, lockkit.Invalid("node: malformed address %q: want host:port, password@host:port or a redis:// URL: %v", shown, strings.ReplaceAll(err.Error(), s, shown))
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return o, lockkit.Invalid("node: malformed address %q: port %q is not a number in 1..65535", shown, port)
	}
	if host == "" {
		return o, lockkit.Invalid("node: malformed address %q: empty host", shown)
	}
	o.Addr = net.JoinHostPort(host, port)
	return o, nil
}
