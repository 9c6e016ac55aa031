package redisnode

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/harness/fault"

	"github.com/gomodule/redigo/redis"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/backends"
	"github.com/locklab/locklab/internal/tooling/redisaddr"
	"github.com/locklab/locklab/internal/tooling/redisproc"
)

func TestAddrsBackend(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	plain, err := redisproc.Start(redisproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	secret, err := redisproc.Start(redisproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer secret.Stop()
	sc, err := redis.Dial("tcp", secret.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Do("CONFIG", "SET", "requirepass", "s3cr@t"); err != nil {
		t.Fatal(err)
	}
	sc.Close()
	c := start(t, Options{Backend: backends.Addrs, Addrs: []string{plain.Addr, "s3cr@t@" + secret.Addr}})
	if c.Backend() != backends.Addrs || len(c.Nodes()) != 2 {
		t.Fatalf("backend %s, %d nodes", c.Backend(), len(c.Nodes()))
	}
	t.Log(c.Describe())
	for _, f := range fault.All() {
		if fault.Supports(c.Nodes()[0], f) {
			t.Errorf("a node of the addrs backend supports %v", f)
		}
	}
	n1, n2 := c.Nodes()[0], c.Nodes()[1]
	if n2.Password() != "s3cr@t" || n2.Addr() != secret.Addr {
		t.Errorf("n2: addr %s password %q", n2.Addr(), n2.Password())
	}
	for _, n := range c.Nodes() {
		conn := n.Pool().Get()
		if _, err := conn.Do("SET", "t", "v", "EX", 100); err != nil {
			t.Fatalf("%s: %v", n.Name(), err)
		}
		conn.Do("SET", "k", "v")
		conn.Close()
		// The server is not the harness's: its keys and settings stay.
		if !n.Shared() {
			t.Errorf("%s: a node of the addrs backend is not Shared", n.Name())
		}
		for op, f := range map[string]func() error{
			"ExpireAll":     func() error { return n.ExpireAll(ctx) },
			"Flush":         func() error { return n.Flush(ctx) },
			"SetAppendOnly": func() error { return n.SetAppendOnly(ctx, true, "always") },
		} {
			if err := f(); !errors.Is(err, fault.ErrUnsupported) {
				t.Errorf("%s: %s on a shared server: %v, want fault.ErrUnsupported", n.Name(), op, err)
			}
		}
		if _, ok := get(t, n, "t"); !ok {
			t.Errorf("%s: a TTL key of the server's was removed", n.Name())
		}
		if _, ok := get(t, n, "k"); !ok {
			t.Errorf("%s: a key of the server's was removed", n.Name())
		}
		if aof, err := redis.Strings(n.Do(ctx, "CONFIG", "GET", "appendonly")); err != nil || aof[1] != "no" {
			t.Errorf("%s: appendonly %v (%v), want it left at no", n.Name(), aof, err)
		}
	}
	faults := map[string]func() error{
		"Pause":     func() error { return n1.Pause(ctx) },
		"Resume":    func() error { return n1.Resume(ctx) },
		"Kill":      func() error { return n1.Kill(ctx) },
		"Restart":   func() error { return n1.Restart(ctx, true) },
		"Partition": func() error { return n1.Partition(ctx) },
		"Heal":      func() error { return n1.Heal(ctx) },
		"AddReplica": func() error {
			_, err := c.AddReplica(ctx, n1)
			return err
		},
	}
	for name, f := range faults {
		err := f()
		if !errors.Is(err, fault.ErrUnsupported) || !strings.Contains(err.Error(), "addrs backend") {
			t.Errorf("%s on addrs: %v, want fault.ErrUnsupported with an explanation", name, err)
		}
	}
	if err := reach(n1, time.Second); err != nil {
		t.Errorf("n1 after refused faults: %v", err)
	}

	// A server that does not answer is an error naming the node.
	port, _ := redisproc.FreePort()
	_, err = Start(ctx, Options{Backend: backends.Addrs, Addrs: []string{"127.0.0.1:" + strconv.Itoa(port)}, StartTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "node n1") {
		t.Errorf("Start on a dead address: %v", err)
	}
}

// TestAddrsBackendURL: an address given as a redis:// URL brings its ACL
// user and database to every connection of the node, and Node.URL gives
// back what ParseAddr reads.
func TestAddrsBackendURL(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	srv, err := redisproc.Start(redisproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	admin, err := redis.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Do("ACL", "SETUSER", "alice", "on", ">pa:ss", "~*", "+@all"); err != nil {
		t.Fatal(err)
	}
	url := "redis://alice:pa%3Ass@" + srv.Addr + "/5"
	c := start(t, Options{Backend: backends.Addrs, Addrs: []string{url}})
	n := c.Nodes()[0]
	conn := n.Pool().Get()
	who, err := redis.String(conn.Do("ACL", "WHOAMI"))
	if err != nil || who != "alice" {
		t.Errorf("ACL WHOAMI: %q, %v; want alice", who, err)
	}
	if _, err := conn.Do("SET", "url:k", "v"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if _, err := admin.Do("SELECT", 5); err != nil {
		t.Fatal(err)
	}
	if v, err := redis.String(admin.Do("GET", "url:k")); err != nil || v != "v" {
		t.Errorf("GET in database 5: %q, %v", v, err)
	}
	if n.URL() != url {
		t.Errorf("URL() = %q, want %q", n.URL(), url)
	}
	if o, err := redisaddr.Parse(n.URL()); err != nil || o.Username != "alice" || o.Password != "pa:ss" || o.DB != 5 {
		t.Errorf("redisaddr.Parse(URL()) = %+v, %v", o, err)
	}

	// A wrong password is refused with Redis's own message, naming the node.
	_, err = Start(ctx, Options{Backend: backends.Addrs, Addrs: []string{"redis://alice:wrong@" + srv.Addr}, StartTimeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "WRONGPASS") || !strings.Contains(err.Error(), "node n1") {
		t.Errorf("Start with a wrong password: %v", err)
	}
	for _, bad := range []string{"http://" + srv.Addr, "redis://" + srv.Addr + "/x", "no-port"} {
		if _, err := Start(ctx, Options{Backend: backends.Addrs, Addrs: []string{bad}}); !errors.Is(err, locklab.ErrInvalid) {
			t.Errorf("Start(%q): %v, want ErrInvalid", bad, err)
		}
	}
}
