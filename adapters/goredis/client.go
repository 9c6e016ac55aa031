package goredis

import (
	"context"
	"net"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/respconn"
)

// NewClient returns a go-redis client whose every command goes through
// src, the direction opposite to New: a lock written on go-redis runs on
// locklab's connection sources, the race harness's among them, which a
// locklabtest factory receives in Config.Pool:
//
//	func(cfg locklab.Config) (locklab.Locker, error) {
//		return mylock.New(goredis.NewClient(cfg.Pool, nil)), nil
//	}
//
// There each command the lock sends is one step of the schedule, as a
// redigo command is. A pipeline's commands are sent one by one, each its
// own step; MULTI … EXEC and WATCH run on one connection of src, taken at
// MULTI (or WATCH) and given back after EXEC, DISCARD or UNWATCH, and so
// does the EVAL that go-redis's Script sends after an EVALSHA answered
// NOSCRIPT. Every other command runs on a connection taken from src for it
// and given back once it has answered, so that between two commands the
// lock holds none.
//
// The client's connections are not sockets: go-redis writes its commands
// to them, they send each through a connection of src with Do, and they
// give the replies back to go-redis in RESP2 (they are the connections of
// internal/respconn, which the rueidis adapter's NewClient builds
// on too). The handshake go-redis makes on a new connection is answered
// there, without reaching src: HELLO is refused, so the client speaks
// RESP2, and the rest of it is turned off.
// opt (nil for go-redis's defaults) is copied, and what belongs to src's
// connections is set: Addr, Dialer and Protocol (2), no DB, credentials,
// TLS or client name (src's connections have theirs), no CLIENT SETINFO
// and no maintenance notifications; the read and write timeouts are src's,
// its connections' own. What the lock sees of go-redis stays: its command
// types and replies, redis.Nil, its retries (MaxRetries: an error of src's
// connection that is not the server's answer reaches go-redis as its
// socket's would, and go-redis sends the command again on a new
// connection when it retries that error, as it does an unexpected EOF,
// which is what the harness's lost reply is), its hooks and its pool.
// Pub/sub does not go through such a client. Closing the client gives
// back the connections it holds.
func NewClient(src locklab.ConnSource, opt *redis.Options) *redis.Client {
	var o redis.Options
	if opt != nil {
		o = *opt
	}
	o.Network, o.Addr = "tcp", "locklab"
	o.Dialer = func(context.Context, string, string) (net.Conn, error) {
		return respconn.New(src, respconn.Options{Name: "goredis.NewClient"}), nil
	}
	o.Protocol = 2
	o.DB, o.Username, o.Password, o.CredentialsProvider = 0, "", "", nil
	o.CredentialsProviderContext, o.StreamingCredentialsProvider = nil, nil
	o.TLSConfig, o.ClientName, o.OnConnect = nil, "", nil
	o.DisableIdentity = true
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	// -2: go-redis sets no deadline on the connections (src's bound each
	// command, and the harness holds one back for as long as the schedule
	// says).
	o.ReadTimeout, o.WriteTimeout = -2, -2
	return redis.NewClient(&o)
}
