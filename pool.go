package locklab

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/locklab/locklab/internal/lockerr"
)

// Defaults of PoolOptions (and NewPool).
const (
	DefaultDialTimeout  = 2 * time.Second
	DefaultReadTimeout  = 2 * time.Second
	DefaultWriteTimeout = 2 * time.Second
	DefaultMaxIdle      = 64
	DefaultIdleTimeout  = time.Minute
)

// PoolOptions describe how to reach one Redis server: its address, the ACL
// user, the database, TLS, the timeouts and the pool's size. ParseURL reads
// them from a redis:// or rediss:// URL; NewPoolOptions makes a pool of them.
// A zero field picks its documented default.
type PoolOptions struct {
	// Addr is the server's "host:port". Required.
	Addr string
	// Username and Password authenticate each new connection (AUTH). With
	// a Username, Password is that ACL user's; with none, Password is the
	// default user's (requirepass). Default: no AUTH.
	Username string
	Password string
	// DB is the database each new connection selects. Default 0.
	DB int
	// TLSConfig, when not nil, makes every connection TLS with it. An
	// empty ServerName is taken from Addr's host. Default: plain TCP.
	TLSConfig *tls.Config
	// DialTimeout bounds the TCP connect and the TLS handshake. Default
	// DefaultDialTimeout (2s).
	DialTimeout time.Duration
	// ReadTimeout and WriteTimeout bound each command's read and write.
	// Default DefaultReadTimeout and DefaultWriteTimeout (2s each).
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// MaxIdle is how many idle connections the pool keeps. Default
	// DefaultMaxIdle (64).
	MaxIdle int
	// MaxActive bounds the connections open at once; a GetContext beyond
	// it waits for one to be returned, until its context ends. Default 0:
	// no bound.
	MaxActive int
	// IdleTimeout closes connections idle for longer. Default
	// DefaultIdleTimeout (1 minute).
	IdleTimeout time.Duration
	// ClientName names each new connection (CLIENT SETNAME), as the
	// server's CLIENT LIST shows it. Default: unnamed.
	ClientName string
}

// withDefaults checks o and fills in the defaults.
func (o PoolOptions) withDefaults() (PoolOptions, error) {
	if o.Addr == "" {
		return o, lockerr.Invalid("PoolOptions.Addr is empty")
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return o, lockerr.Invalid("PoolOptions.Addr %q: want host:port: %v", o.Addr, err)
	}
	if o.Username != "" && o.Password == "" {
		return o, lockerr.Invalid("PoolOptions.Username %q without a Password", o.Username)
	}
	if o.DB < 0 {
		return o, lockerr.Invalid("PoolOptions.DB must not be negative, got %d", o.DB)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"DialTimeout", &o.DialTimeout, DefaultDialTimeout},
		{"ReadTimeout", &o.ReadTimeout, DefaultReadTimeout},
		{"WriteTimeout", &o.WriteTimeout, DefaultWriteTimeout},
		{"IdleTimeout", &o.IdleTimeout, DefaultIdleTimeout},
	} {
		if *d.v < 0 {
			return o, lockerr.Invalid("PoolOptions.%s must not be negative, got %v", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.MaxIdle < 0 || o.MaxActive < 0 {
		return o, lockerr.Invalid("PoolOptions.MaxIdle and MaxActive must not be negative, got %d and %d", o.MaxIdle, o.MaxActive)
	}
	if o.MaxIdle == 0 {
		o.MaxIdle = DefaultMaxIdle
	}
	return o, nil
}

// DialOptions returns the redigo dial options of o (with its defaults), for
// dialling single connections the way NewPoolOptions's pool does. It
// fails with ErrInvalid where NewPoolOptions would.
func (o PoolOptions) DialOptions() ([]redis.DialOption, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return o.dialOptions(), nil
}

func (o PoolOptions) dialOptions() []redis.DialOption {
	opts := []redis.DialOption{
		redis.DialConnectTimeout(o.DialTimeout),
		redis.DialReadTimeout(o.ReadTimeout),
		redis.DialWriteTimeout(o.WriteTimeout),
	}
	if o.Password != "" {
		if o.Username != "" {
			opts = append(opts, redis.DialUsername(o.Username))
		}
		opts = append(opts, redis.DialPassword(o.Password))
	}
	if o.DB != 0 {
		opts = append(opts, redis.DialDatabase(o.DB))
	}
	if o.ClientName != "" {
		opts = append(opts, redis.DialClientName(o.ClientName))
	}
	if o.TLSConfig != nil {
		opts = append(opts, redis.DialUseTLS(true), redis.DialTLSConfig(o.TLSConfig),
			redis.DialTLSHandshakeTimeout(o.DialTimeout))
	}
	return opts
}

// NewPoolOptions returns a redigo pool on the server o describes, which
// satisfies ConnSource. It dials nothing yet: a wrong password, a
// certificate the client does not trust or a server that is down show at
// the first command, as ErrUnavailable carrying the server's or the TLS
// layer's own message, at once rather than after a timeout. Connections
// idle for PoolIdleCheck or longer are checked with a PING before they are
// handed out. Bad options give ErrInvalid.
func NewPoolOptions(o PoolOptions) (*redis.Pool, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	dial := o.dialOptions()
	return &redis.Pool{
		MaxIdle:     o.MaxIdle,
		MaxActive:   o.MaxActive,
		Wait:        o.MaxActive > 0,
		IdleTimeout: o.IdleTimeout,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", o.Addr, dial...)
		},
		TestOnBorrowContext: pingIfIdle,
	}, nil
}

// ParseURL reads PoolOptions from a URL:
//
//	redis://[[user]:password@]host[:port][/db][?option=value&...]
//	rediss://...  (the same, over TLS)
//
// The port defaults to 6379, the host to localhost, the database to 0. As
// with redis-cli and redigo, a user-info without a colon is a password
// ("redis://secret@host"); "redis://alice:secret@host" is the ACL user alice.
// The user-info runs to the URL's last "@", and the user to its first
// colon: the password may hold any character, "/", "#", "?", "@" and ":"
// included, as it is or percent-encoded ("%25" for a "%" itself).
// rediss:// sets a TLSConfig that trusts the system's roots (set its
// RootCAs, or Certificates for a client certificate, to change that). The
// options are dial_timeout, read_timeout and write_timeout (Go durations:
// "500ms"), max_idle, max_active and idle_timeout; other fields keep their
// defaults. Anything else is ErrInvalid, whose message shows the URL as
// RedactURL does and no part of the password.
func ParseURL(raw string) (PoolOptions, error) {
	var o PoolOptions
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return o, lockerr.Invalid("redis URL %q: want redis://[user:password@]host[:port][/db]", RedactURL(raw))
	}
	// The user-info is cut off before the rest is parsed, so that no
	// message of net/url can quote it.
	var userinfo string
	hasUser := false
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		userinfo, rest, hasUser = rest[:at], rest[at+1:], true
	}
	u, err := url.Parse(scheme + "://" + rest)
	if err != nil {
		// url.Error repeats the URL: keep only why.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return o, lockerr.Invalid("redis URL %q: %v", RedactURL(raw), err)
	}
	if hasUser && userinfo != "" {
		user, pass, withUser := strings.Cut(userinfo, ":")
		if !withUser {
			user, pass = "", userinfo
		}
		var uerr, perr error
		if o.Username, uerr = url.PathUnescape(user); uerr != nil {
			return o, lockerr.Invalid("redis URL %q: the user is not valid percent-encoding (write %%25 for a %%)", RedactURL(raw))
		}
		if o.Password, perr = url.PathUnescape(pass); perr != nil {
			return o, lockerr.Invalid("redis URL %q: the password is not valid percent-encoding (write %%25 for a %%)", RedactURL(raw))
		}
	}
	switch u.Scheme {
	case "redis":
	case "rediss":
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	default:
		return o, lockerr.Invalid("redis URL %q: scheme must be redis or rediss, got %q", RedactURL(raw), u.Scheme)
	}
	if u.Opaque != "" || u.Fragment != "" {
		return o, lockerr.Invalid("redis URL %q: want redis://[user:password@]host[:port][/db]", RedactURL(raw))
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = "6379"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return o, lockerr.Invalid("redis URL %q: port %q is not a number in 1..65535", RedactURL(raw), port)
	}
	o.Addr = net.JoinHostPort(host, port)
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return o, lockerr.Invalid("redis URL %q: database %q is not a number", RedactURL(raw), db)
		}
		o.DB = n
	}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		var perr error
		switch k {
		case "dial_timeout":
			o.DialTimeout, perr = time.ParseDuration(v)
		case "read_timeout":
			o.ReadTimeout, perr = time.ParseDuration(v)
		case "write_timeout":
			o.WriteTimeout, perr = time.ParseDuration(v)
		case "idle_timeout":
			o.IdleTimeout, perr = time.ParseDuration(v)
		case "max_idle":
			o.MaxIdle, perr = strconv.Atoi(v)
		case "max_active":
			o.MaxActive, perr = strconv.Atoi(v)
		default:
			return o, lockerr.Invalid("redis URL %q: unknown option %q (dial_timeout, read_timeout, write_timeout, idle_timeout, max_idle, max_active)", RedactURL(raw), k)
		}
		if perr != nil {
			return o, lockerr.Invalid("redis URL %q: option %s=%q: %v", RedactURL(raw), k, v, perr)
		}
	}
	if _, err := o.withDefaults(); err != nil {
		return PoolOptions{}, err
	}
	return o, nil
}

// URL is o as a redis:// (or, with a TLSConfig, rediss://) URL that ParseURL
// reads back: address, user, password and database. The password is
// included as it is; use Redacted to show the URL.
func (o PoolOptions) URL() string {
	u := url.URL{Scheme: "redis", Host: o.Addr}
	if o.TLSConfig != nil {
		u.Scheme = "rediss"
	}
	switch {
	case o.Username != "":
		u.User = url.UserPassword(o.Username, o.Password)
	case o.Password != "":
		u.User = url.UserPassword("", o.Password)
	}
	if o.DB != 0 {
		u.Path = "/" + strconv.Itoa(o.DB)
	}
	return u.String()
}

// Redacted is URL with the password replaced by "xxxxx".
func (o PoolOptions) Redacted() string { return RedactURL(o.URL()) }

// RedactURL is raw, a Redis URL or address, with its password replaced by
// "xxxxx", for messages, whether raw parses or not: everything between
// "://" and the last "@" but the user (up to the first colon) is hidden,
// as is everything before the last "@" of an address without a scheme
// ("password@host:port"). A URL or address without an "@" has no
// password and is returned as it is.
func RedactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		if at := strings.LastIndex(raw, "@"); at >= 0 {
			return "xxxxx" + raw[at:]
		}
		return raw
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	shown := "xxxxx"
	if user, _, withUser := strings.Cut(rest[:at], ":"); withUser {
		shown = user + ":xxxxx"
	}
	return scheme + "://" + shown + rest[at:]
}

// NewPool returns a redigo pool for addr ("host:port") with the defaults of
// PoolOptions: dial, read and write timeouts of 2s, 64 idle connections
// kept for a minute. Extra dial options (a password, a database) are
// appended; NewPoolOptions takes them as fields, with TLS and an ACL user.
// A connection that has been idle for PoolIdleCheck or longer is checked
// with a PING before it is handed out, so one the server closed meanwhile
// (a restart, CLIENT KILL, its idle timeout) is replaced instead of failing
// the caller's command.
func NewPool(addr string, opts ...redis.DialOption) *redis.Pool {
	o := append([]redis.DialOption{
		redis.DialConnectTimeout(DefaultDialTimeout),
		redis.DialReadTimeout(DefaultReadTimeout),
		redis.DialWriteTimeout(DefaultWriteTimeout),
	}, opts...)
	return &redis.Pool{
		MaxIdle:     DefaultMaxIdle,
		IdleTimeout: DefaultIdleTimeout,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr, o...)
		},
		TestOnBorrowContext: pingIfIdle,
	}
}

// PoolIdleCheck is how long a connection of NewPool may sit idle before it
// is checked with a PING on borrow.
const PoolIdleCheck = time.Second

// pingIfIdle is NewPool's health check on borrow, as redigo's documentation
// shows it.
func pingIfIdle(ctx context.Context, c redis.Conn, lastUsed time.Time) error {
	if time.Since(lastUsed) < PoolIdleCheck {
		return nil
	}
	_, err := redis.DoContext(c, ctx, "PING")
	return err
}
