package locklab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/locklab/locklab/internal/lockerr"
)

// DefaultSentinelRefresh is how often a SentinelPool asks again which server
// is the master, by default.
const DefaultSentinelRefresh = time.Second

// SentinelOptions describe a master watched by Redis Sentinel.
type SentinelOptions struct {
	// MasterName is the name the Sentinels monitor the master under.
	// Required.
	MasterName string
	// Sentinels are the Sentinels' "host:port" addresses, at least one.
	// They are asked in turn; the one that answers is asked first next
	// time.
	Sentinels []string
	// SentinelUsername and SentinelPassword authenticate to the Sentinels
	// (their own ACL, not the master's). Default: no AUTH.
	SentinelUsername string
	SentinelPassword string
	// Master is how to connect to the master once found: ACL user, TLS,
	// database, timeouts, pool size, as for NewPoolOptions; its Addr must
	// be empty. The Sentinels are dialled with its timeouts and TLS.
	Master PoolOptions
	// Refresh is how often the master is asked for again, besides after
	// any failure to reach it. Default DefaultSentinelRefresh (1s). The
	// questions keep to a fixed grid, one every Refresh from the first:
	// pools started at different moments keep asking at different moments,
	// even after a stall (a loaded machine, a slow Sentinel) has held them
	// all past their turn.
	Refresh time.Duration
}

// SentinelPool is a ConnSource on the current master of a Sentinel-watched
// group. It asks the Sentinels for the master's address at the first
// connection, again every Refresh, and at the next connection after the
// master could not be dialled, found a server that is no longer master
// (ROLE), answered READONLY or failed a command without an answer — so
// after a failover it moves to the promoted replica. Connections to the old
// master are closed when they are returned. A SentinelPool is safe for
// concurrent use; Close it when done.
type SentinelPool struct {
	opts SentinelOptions

	mu        sync.Mutex
	sentinels []string
	addr      string
	pool      *redis.Pool
	// checked is when the Sentinels last answered (or failed to); due is
	// when they are asked again, the first point after checked on the
	// grid phase + k*Refresh; phase is when the first question began.
	checked time.Time
	due     time.Time
	phase   time.Time
	closed  bool
	// resolving serializes the Sentinel queries.
	resolving sync.Mutex
}

var _ ConnSource = (*SentinelPool)(nil)

// errNotMaster is a dial that reached a server that is not the master.
var errNotMaster = errors.New("not the master")

// NewSentinelPool returns a SentinelPool; it dials nothing yet. Bad options
// give ErrInvalid.
func NewSentinelPool(o SentinelOptions) (*SentinelPool, error) {
	if o.MasterName == "" {
		return nil, lockerr.Invalid("SentinelOptions.MasterName is empty")
	}
	if len(o.Sentinels) == 0 {
		return nil, lockerr.Invalid("SentinelOptions.Sentinels is empty")
	}
	for _, a := range o.Sentinels {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, lockerr.Invalid("Sentinel address %q: want host:port: %v", a, err)
		}
	}
	if o.Master.Addr != "" {
		return nil, lockerr.Invalid("SentinelOptions.Master.Addr must be empty: the Sentinels tell it")
	}
	if o.SentinelUsername != "" && o.SentinelPassword == "" {
		return nil, lockerr.Invalid("SentinelOptions.SentinelUsername %q without a SentinelPassword", o.SentinelUsername)
	}
	if o.Refresh < 0 {
		return nil, lockerr.Invalid("SentinelOptions.Refresh must not be negative, got %v", o.Refresh)
	}
	if o.Refresh == 0 {
		o.Refresh = DefaultSentinelRefresh
	}
	check := o.Master
	check.Addr = "sentinel:0"
	if _, err := check.withDefaults(); err != nil {
		return nil, err
	}
	return &SentinelPool{opts: o, sentinels: append([]string(nil), o.Sentinels...)}, nil
}

// GetContext returns a connection to the current master.
func (p *SentinelPool) GetContext(ctx context.Context) (redis.Conn, error) {
	pool, err := p.current(ctx, false)
	if err != nil {
		return nil, err
	}
	c, err := pool.GetContext(ctx)
	if err == nil {
		return &sentinelConn{ConnWithContext: c.(redis.ConnWithContext), p: p}, nil
	}
	if ctx.Err() != nil {
		return nil, err
	}
	// The master may have moved: ask again, once.
	pool, rerr := p.current(ctx, true)
	if rerr != nil {
		return nil, fmt.Errorf("%w (and before: %v)", rerr, err)
	}
	if c, err = pool.GetContext(ctx); err != nil {
		return nil, err
	}
	return &sentinelConn{ConnWithContext: c.(redis.ConnWithContext), p: p}, nil
}

// stale makes the next GetContext ask the Sentinels again.
func (p *SentinelPool) stale() {
	p.mu.Lock()
	p.due = time.Time{}
	p.mu.Unlock()
}

// asked records that the Sentinels were asked at now and sets the next
// question's time on the pool's grid. The caller holds p.mu.
func (p *SentinelPool) asked(now time.Time) {
	p.checked = now
	r := p.opts.Refresh
	p.due = p.phase.Add((now.Sub(p.phase)/r + 1) * r)
}

// sentinelConn is a connection to the master that notices when the server
// answers as a replica (READONLY: a failover demoted it) or the connection
// fails, and makes the pool ask the Sentinels again at the next GetContext.
type sentinelConn struct {
	redis.ConnWithContext
	p *SentinelPool
}

var (
	_ redis.ConnWithContext = (*sentinelConn)(nil)
	_ redis.ConnWithTimeout = (*sentinelConn)(nil)
)

func (c *sentinelConn) check(v any, err error) (any, error) {
	if err == nil {
		return v, nil
	}
	var re redis.Error
	if !errors.As(err, &re) || strings.HasPrefix(string(re), "READONLY") {
		c.p.stale()
	}
	return v, err
}

func (c *sentinelConn) Do(cmd string, args ...any) (any, error) {
	return c.check(c.ConnWithContext.Do(cmd, args...))
}

func (c *sentinelConn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	return c.check(c.ConnWithContext.DoContext(ctx, cmd, args...))
}

func (c *sentinelConn) DoWithTimeout(timeout time.Duration, cmd string, args ...any) (any, error) {
	return c.check(redis.DoWithTimeout(c.ConnWithContext, timeout, cmd, args...))
}

func (c *sentinelConn) Receive() (any, error) { return c.check(c.ConnWithContext.Receive()) }

func (c *sentinelConn) ReceiveWithTimeout(timeout time.Duration) (any, error) {
	return c.check(redis.ReceiveWithTimeout(c.ConnWithContext, timeout))
}

func (c *sentinelConn) ReceiveContext(ctx context.Context) (any, error) {
	return c.check(c.ConnWithContext.ReceiveContext(ctx))
}

// MasterAddr returns the master's address as last told by the Sentinels, ""
// before the first connection.
func (p *SentinelPool) MasterAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// Close closes the connections to the master; GetContext fails afterwards.
func (p *SentinelPool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.pool != nil {
		return p.pool.Close()
	}
	return nil
}

// current returns the pool on the master, asking the Sentinels first when
// force is set, when none is known or when the last answer is older than
// Refresh.
func (p *SentinelPool) current(ctx context.Context, force bool) (*redis.Pool, error) {
	began := time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("locklab: SentinelPool closed")
	}
	if p.phase.IsZero() {
		p.phase = began
	}
	pool, fresh := p.pool, began.Before(p.due)
	p.mu.Unlock()
	if pool != nil && fresh && !force {
		return pool, nil
	}
	p.resolving.Lock()
	defer p.resolving.Unlock()
	p.mu.Lock()
	if p.pool != nil && p.checked.After(began) {
		// Another caller asked the Sentinels meanwhile.
		pool = p.pool
		p.mu.Unlock()
		return pool, nil
	}
	p.mu.Unlock()
	addr, err := p.askMaster(ctx)
	if err != nil {
		if pool != nil && !force {
			// Keep the last answer while the Sentinels are away, and
			// ask them again at the next Refresh.
			p.mu.Lock()
			p.asked(time.Now())
			p.mu.Unlock()
			return pool, nil
		}
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("locklab: SentinelPool closed")
	}
	p.asked(time.Now())
	if addr != p.addr || p.pool == nil {
		if p.pool != nil {
			p.pool.Close()
		}
		p.addr, p.pool = addr, p.newPool(addr)
	}
	return p.pool, nil
}

// newPool is the pool on the master at addr: every new connection checks
// with ROLE that the server is still the master.
func (p *SentinelPool) newPool(addr string) *redis.Pool {
	o := p.opts.Master
	o.Addr = addr
	o, _ = o.withDefaults()
	dial := o.dialOptions()
	return &redis.Pool{
		MaxIdle:     o.MaxIdle,
		MaxActive:   o.MaxActive,
		Wait:        o.MaxActive > 0,
		IdleTimeout: o.IdleTimeout,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			c, err := redis.DialContext(ctx, "tcp", addr, dial...)
			if err != nil {
				return nil, err
			}
			role, err := redis.Values(redis.DoContext(c, ctx, "ROLE"))
			if err == nil && len(role) > 0 {
				if r, _ := redis.String(role[0], nil); r != "master" {
					err = fmt.Errorf("%s is %s, %w", addr, r, errNotMaster)
				}
			}
			if err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		},
		TestOnBorrowContext: pingIfIdle,
	}
}

// askMaster asks the Sentinels in turn for the master's address.
func (p *SentinelPool) askMaster(ctx context.Context) (string, error) {
	p.mu.Lock()
	sentinels := append([]string(nil), p.sentinels...)
	p.mu.Unlock()
	var errs []string
	for i, s := range sentinels {
		addr, err := p.askOne(ctx, s)
		if err != nil {
			errs = append(errs, s+": "+err.Error())
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if i > 0 {
			// The one that answered goes first next time.
			p.mu.Lock()
			p.sentinels = append([]string{s}, append(sentinels[:i:i], sentinels[i+1:]...)...)
			p.mu.Unlock()
		}
		return addr, nil
	}
	return "", lockerr.Unavailable(fmt.Errorf("no Sentinel told the master %q: %s", p.opts.MasterName, strings.Join(errs, "; ")))
}

func (p *SentinelPool) askOne(ctx context.Context, sentinel string) (string, error) {
	o := p.opts.Master
	o.Addr, o.Username, o.Password, o.DB = sentinel, p.opts.SentinelUsername, p.opts.SentinelPassword, 0
	o, _ = o.withDefaults()
	c, err := redis.DialContext(ctx, "tcp", sentinel, o.dialOptions()...)
	if err != nil {
		return "", err
	}
	defer c.Close()
	v, err := redis.Strings(redis.DoContext(c, ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", p.opts.MasterName))
	if errors.Is(err, redis.ErrNil) {
		return "", fmt.Errorf("knows no master named %q", p.opts.MasterName)
	}
	if err != nil {
		return "", err
	}
	if len(v) != 2 {
		return "", fmt.Errorf("unexpected answer %q", v)
	}
	return net.JoinHostPort(v[0], v[1]), nil
}
