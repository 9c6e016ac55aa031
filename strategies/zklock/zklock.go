// Package zklock holds three locks on Apache ZooKeeper, each through the
// *zk.Conn of github.com/go-zookeeper/zk that the caller gives it.
// Importing the package registers them (family "zookeeper"):
//
//   - RecipeLock ("zk-recipe"): the "Locks" recipe of ZooKeeper's
//     documentation as Apache Curator's InterProcessMutex runs it: a
//     protected ephemeral sequential node under the lock's path, the
//     lowest sequence number holds, a waiter watches only its
//     predecessor; re-entrant per owner; Lease.Fence is the node's czxid.
//   - EphemeralLock ("zk-ephemeral"): the lock many blog posts teach, the
//     "simple lock" of the ZooKeeper paper: one ephemeral node at the
//     lock's path, created or refused; a waiter watches that one node, so
//     every waiter wakes at its deletion (the herd effect); Lease.Fence is
//     the node's czxid.
//   - GolibLock ("zk-golib"): zk.NewLock of go-zookeeper/zk as shipped,
//     with its flaws: its Lock blocks until it holds the lock, and nothing
//     tells its holder that the lock was lost.
//
// A program picks one by name, as any other strategy:
//
//	import _ "github.com/locklab/locklab/strategies/zklock"
//
//	conn, _, err := zk.Connect([]string{"10.0.0.1:2181", "10.0.0.2:2181", "10.0.0.3:2181"}, 10*time.Second)
//	lock, err := strategies.New("zk-recipe", locklab.Config{Store: conn})
//
// Each takes a *zk.Conn in Config.Store and refuses anything else, and
// Config.Pool and Config.Nodes, with locklab.ErrInvalid; NewRecipe,
// NewEphemeral and NewGolib build them from a connection directly. The
// connection is the caller's: its servers, session timeout, credentials
// (AddAuth) and logger are the caller's choice, and no lock closes it.
// Every request a lock makes goes through that connection. Its nodes live
// under Options.Root ("/locklab" by default), one subtree per strategy:
// Path tells where the lock on a key lives. docs/library.md shows a whole
// program (the package's Example).
//
// # Sessions, not TTLs
//
// A ZooKeeper lock is an ephemeral node: it lives as long as the session
// that created it, and the server ends a session that it has not heard from
// for the session's timeout, deleting its ephemeral nodes. That timeout is
// the connection's: zk.Connect's sessionTimeout, as the servers negotiated
// it (held between 2 and 20 ticks), and nothing here can change it. The
// connection's own goroutines send heartbeats, so the lock lasts for as
// long as the holder's process runs and reaches a server, whatever the ttl
// given to Acquire. That ttl reaches no server: it sets Lease.Until, the
// holder's own deadline, as on PostgreSQL's session locks. Extend checks
// that the lock's node is still there, still owned by the connection's
// session, and sets a new Until; it cannot lengthen anything on the
// server, where nothing has a TTL.
//
// # Why it is here, and how it fails
//
// ZooKeeper orders every write through its leader's atomic broadcast
// (Zab), so a lock node survives the loss of any minority of the ensemble,
// leader included. That is not mutual exclusion. A holder that is paused
// (GC, a stopped VM) or cut off from the ensemble for longer than its
// session timeout loses its session: the server deletes its node and the
// next waiter takes the lock, while the holder, when it resumes, goes on
// with its work. Curator's users met it as CURATOR-206 ("2 clients
// acquired the same InterProcessLock") and CURATOR-604 ("Double locking
// issue", after a session's expiry and reconnect); the holder learns of
// the expiry only once its connection reaches a server again, and
// go-zookeeper's connection then opens a new session on its own, without a
// word to the lock (zk-golib never notices; zk-recipe and zk-ephemeral
// tell at the next Extend or Release). The remedy is fencing: a node's
// czxid, the id of the transaction that created it, grows with every
// write to the ensemble, so Lease.Fence grows with every holder, and a
// resource that refuses writes carrying a smaller fence than one it has
// seen refuses the stale holder. (A resource kept in ZooKeeper itself can
// do better: a multi() that checks the lock node with each write fails
// once the node is gone, as CURATOR-689 proposes.)
//
// # Contexts
//
// go-zookeeper's requests take no context: each Acquire, Release and
// Extend checks ctx before each request it sends, and a request under way
// ends only with its answer or the connection's failure (about two thirds
// of the session timeout without an answer). A node an attempt created is
// deleted before the call returns even when ctx has ended meanwhile: left
// behind, it would stand in the lock's queue for as long as the session
// lives. The waits of RecipeLock.Lock and EphemeralLock.Lock end with ctx.
// GolibLock runs zk.Lock's blocking Lock in a goroutine of its own to
// bound it; see GolibLock for what becomes of it when the call gives up.
//
// # Closing
//
// No lock here opens anything of its own, so none has a Close method and
// locklab.Close does nothing: a lock still held ends with its session,
// when the connection is closed or expires. Close the connection after
// every Locker built on it.
package zklock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/single"
	"github.com/locklab/locklab/lockkit"
)

// Family is the family of the strategies of this package.
const Family = "zookeeper"

// The registered names of the strategies.
const (
	RecipeName    = "zk-recipe"
	EphemeralName = "zk-ephemeral"
	GolibName     = "zk-golib"
)

// DefaultRoot is the path under which the locks' nodes live when
// Options.Root is empty.
const DefaultRoot = "/locklab"

// DefaultPatience is how long GolibLock.Acquire waits for zk.Lock's Lock
// when Options.Patience is 0.
const DefaultPatience = time.Second

// Options configure a lock beyond its connection.
type Options struct {
	// Root is the path under which the locks' nodes live: the lock on a
	// key is Root/<strategy name>/<key escaped> (Path). Default
	// DefaultRoot. It must be an absolute path without a trailing slash.
	Root string
	// ACL is the ACL of every node a lock creates. Default
	// zk.WorldACL(zk.PermAll), as go-zookeeper's own examples use.
	ACL []zk.ACL
	// Clock is read for Lease.Until. Default locklab.SystemClock.
	Clock locklab.Clock
	// Rand is where the GUIDs of zk-recipe's protected nodes and
	// zk-golib's lease tokens come from. Default crypto/rand.
	Rand io.Reader
	// Patience is how long GolibLock.Acquire lets zk.Lock's Lock wait in
	// the lock's queue before it gives up with ErrNotAcquired; the other
	// locks refuse it. Default DefaultPatience.
	Patience time.Duration
}

// base is what every lock here keeps of its connection and options.
type base struct {
	conn   *zk.Conn
	name   string
	root   string
	acl    []zk.ACL
	clock  locklab.Clock
	tokens *locklab.TokenSource
}

// newBase checks conn and opts for the strategy name.
func newBase(conn *zk.Conn, name string, opts Options) (base, error) {
	if conn == nil {
		return base{}, lockkit.Invalid("%s: nil *zk.Conn", name)
	}
	if opts.Patience != 0 && name != GolibName {
		return base{}, lockkit.Invalid("%s: Options.Patience is zk-golib's", name)
	}
	if opts.Patience < 0 {
		return base{}, lockkit.Invalid("%s: negative patience %v", name, opts.Patience)
	}
	root := opts.Root
	if root == "" {
		root = DefaultRoot
	}
	if !strings.HasPrefix(root, "/") || strings.HasSuffix(root, "/") || strings.Contains(root, "//") {
		return base{}, lockkit.Invalid("%s: root %q is no absolute ZooKeeper path", name, root)
	}
	acl := opts.ACL
	if acl == nil {
		acl = zk.WorldACL(zk.PermAll)
	}
	clock := opts.Clock
	if clock == nil {
		clock = locklab.SystemClock
	}
	cfg := locklab.Config{Rand: opts.Rand}
	return base{conn: conn, name: name, root: root, acl: acl, clock: clock, tokens: cfg.Tokens()}, nil
}

// fromConfig reads the connection of cfg.Store for the strategy name,
// refusing Config.Pool, Config.Nodes and every option but Store.
func fromConfig(cfg locklab.Config, name string) (*zk.Conn, Options, error) {
	if err := cfg.OnlyOptions(name, locklab.OptStore); err != nil {
		return nil, Options{}, err
	}
	if cfg.Pool != nil || cfg.Nodes != nil {
		return nil, Options{}, lockkit.Invalid("strategy %s reads Config.Store (a *zk.Conn), not Config.Pool or Config.Nodes", name)
	}
	conn, ok := cfg.Store.(*zk.Conn)
	if !ok || conn == nil {
		return nil, Options{}, lockkit.Invalid("Config.Store is %T: strategy %s needs a non-nil *zk.Conn", cfg.Store, name)
	}
	return conn, Options{Clock: cfg.Clock, Rand: cfg.Rand}, nil
}

// Path is where the lock on key lives with the default root, for the
// strategy name: DefaultRoot/name/Escape(key). zk-recipe and zk-golib
// queue their sequential nodes under it; zk-ephemeral's lock is the node
// itself.
func Path(name, key string) string { return DefaultRoot + "/" + name + "/" + Escape(key) }

// path is where the lock on key lives under l's root.
func (b base) path(key string) string { return b.root + "/" + b.name + "/" + Escape(key) }

// Escape makes key one ZooKeeper path element, and a different one for
// every key: ASCII letters, digits and "-_.:@+=,~" stay, and every other
// byte, '%' and '/' included, becomes %XX; "." and ".." have their dots
// escaped, since ZooKeeper refuses them as elements.
func Escape(key string) string {
	var b strings.Builder
	for i := range len(key) {
		c := key[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:@+=,~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if s := b.String(); s != "." && s != ".." {
		return s
	}
	return strings.Repeat("%2E", len(key))
}

// ensureParents creates dir and each of its missing parents as a
// container, which the server deletes once its last child is gone, as
// Curator's creatingParentContainersIfNeeded does. A node another client
// creates meanwhile is no failure.
func (b base) ensureParents(dir string) error {
	parts := strings.Split(strings.TrimPrefix(dir, "/"), "/")
	p := ""
	for _, part := range parts {
		p += "/" + part
		_, err := b.conn.CreateContainer(p, nil, zk.FlagContainer, b.acl)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// begin is the check before each request: ErrUnavailable wrapping
// ctx.Err() once ctx has ended.
func begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return lockkit.Unavailable(err)
	}
	return nil
}

// unavailable wraps err, a failure to reach ZooKeeper or a request it
// failed, in ErrUnavailable; when ctx has ended, ctx.Err() is wrapped too.
func unavailable(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w (%v)", locklab.ErrUnavailable, cerr, err)
	}
	return lockkit.Unavailable(err)
}

// lost reports whether err says that a node of the connection's session
// is gone for good: the node does not exist, or the session that owned it
// expired.
func lost(err error) bool {
	return errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrSessionExpired)
}

// ended wraps a refusal in ctx's end, when a wait gave up because ctx
// ended: errors.Is finds ErrNotAcquired (someone held the lock all along),
// ErrUnavailable and ctx.Err() (the call was cut short).
func ended(ctx context.Context, refusal error) error {
	return fmt.Errorf("%w: %w (%w)", locklab.ErrUnavailable, ctx.Err(), refusal)
}

// checkOwned fails with ErrNotHeld unless node exists, with lease's fence
// as its czxid and conn's session as its ephemeral owner.
func checkOwned(ctx context.Context, conn *zk.Conn, node string, lease locklab.Lease) error {
	ok, stat, err := conn.Exists(node)
	if lost(err) {
		return single.NotHeld(lease.Key)
	}
	if err != nil {
		return unavailable(ctx, err)
	}
	if !ok || stat.Czxid != lease.Fence || stat.EphemeralOwner != conn.SessionID() {
		return single.NotHeld(lease.Key)
	}
	return nil
}
