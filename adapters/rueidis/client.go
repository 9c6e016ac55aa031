package rueidis

import (
	"context"
	"crypto/tls"
	"net"

	"github.com/redis/rueidis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/respconn"
)

// NewClient returns a rueidis client whose every command goes through
// src, the direction opposite to New: a lock written on rueidis runs on
// locklab's connection sources, the race harness's among them, which a
// locklabtest factory receives in Config.Pool:
//
//	func(cfg locklab.Config) (locklab.Locker, error) {
//		client, err := locklabrueidis.NewClient(cfg.Pool, rueidis.ClientOption{})
//		if err != nil {
//			return nil, err
//		}
//		return mylock.New(client), nil
//	}
//
// There each command the lock sends is one step of the schedule, as a
// redigo command is. Commands rueidis writes together (DoMulti, or the
// commands of several goroutines it pipelines into one write) are sent
// one by one, in order, each its own step; MULTI … EXEC and WATCH, on a
// connection of rueidis's Dedicated or Dedicate, run on one connection of
// src, taken at MULTI (or WATCH) and given back after EXEC, DISCARD or
// UNWATCH, and so does the EVAL that a Lua script sends after its EVALSHA
// was answered NOSCRIPT. Every other command runs on a connection taken
// from src for it and given back once it has answered, so that between
// two commands the lock holds none. Blocking commands (BLPOP, …) go on a
// connection of rueidis's blocking pool, as they would, and through src
// the same way.
//
// The client's connections are not sockets (it dials through DialCtxFn):
// rueidis writes its commands to them, they send each through a
// connection of src with Do, and they give the replies back in RESP2
// (the connection of internal/respconn, which go-redis's
// NewClient builds on too). opt is rueidis's, and what belongs to src's
// connections, or would send commands the lock did not, is set:
//
//   - InitAddress is one name and ForceSingleClient is set, with no
//     Sentinel or Standalone options: rueidis would otherwise ask the
//     server for its cluster slots first, a command of its own;
//   - AlwaysRESP2, the protocol src's connections speak. The handshake
//     is answered by the connection, without reaching src: its HELLO 2
//     is refused as an unknown command, which rueidis takes for a server
//     of RESP2 alone; ClientSetInfo is DisableClientSetInfo, and there are
//     no credentials (Username, Password, AuthCredentialsFn), client name,
//     SelectDB, TLS, ReplicaOnly, CLIENT NO-TOUCH or NO-EVICT, nor
//     availability-zone INFO: src's connections have their own;
//   - DisableCache: client-side caching needs RESP3 and the server's
//     invalidations, and a cached read would be no step at all;
//   - ConnWriteTimeout is negative: rueidis sets no deadline on the
//     connections, whose commands src's connections bound (the harness
//     holds one back for as long as the schedule says, which rueidis
//     would take for a dead connection), and sends no background PING,
//     which would be a step the lock did not take;
//   - PipelineMultiplex is negative: one pipelined connection, not one
//     chosen at random per command among several, so that the EVAL a
//     script sends after a NOSCRIPT reaches the connection that holds
//     src's connection for it.
//
// What the lock sees of rueidis stays: its command builder, replies and
// errors, rueidis.Nil, its auto-pipelining, pool sizes and retries
// (DisableRetry as given: an error of src's connection that is not the
// server's answer reaches rueidis as its socket's would, and rueidis
// sends a read-only command again on a new connection, as it does on a
// dropped socket, which is what the harness's lost reply looks like).
// rueidis sends commands of its own, which the connection answers
// itself as the server would on a connection that subscribed to nothing
// and has no MULTI open: UNSUBSCRIBE, PUNSUBSCRIBE, PINGs and DISCARD
// when it cleans a dedicated connection given back, a PING to flush a
// connection it closes. A PING without argument outside MULTI is so
// answered whoever sends it, the lock too: it is no step. Pub/sub does
// not go through such a client. Closing the client gives back the
// connections it holds.
func NewClient(src locklab.ConnSource, opt rueidis.ClientOption) (rueidis.Client, error) {
	opt.InitAddress = []string{"locklab"}
	opt.ForceSingleClient = true
	opt.Sentinel, opt.Standalone = rueidis.SentinelOption{}, rueidis.StandaloneOption{}
	opt.DialCtxFn = func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
		return respconn.New(src, respconn.Options{Name: "rueidis.NewClient", Block: true, LocalPing: true}), nil
	}
	opt.TLSConfig = nil
	opt.AlwaysRESP2 = true
	opt.DisableCache, opt.ClientTrackingOptions, opt.OnInvalidations = true, nil, nil
	opt.ClientSetInfo = rueidis.DisableClientSetInfo
	opt.Username, opt.Password, opt.AuthCredentialsFn, opt.ClientName = "", "", nil, ""
	opt.SelectDB, opt.ReplicaOnly, opt.ClientNoTouch, opt.ClientNoEvict = 0, false, false, false
	opt.EnableReplicaAZInfo, opt.AZFromInfo = false, false
	opt.ConnWriteTimeout = -1
	opt.PipelineMultiplex = -1
	return rueidis.NewClient(opt)
}
