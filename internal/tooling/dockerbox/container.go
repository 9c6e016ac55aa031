// A supervised container: its first process is Script, which starts,
// signals and kills the container's server on command while the container
// stays up at the same address, so that a crash and a restart are those of
// a process (milliseconds), not of a container (about a second).

package dockerbox

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locklab/locklab/internal/tooling/procid"
)

// Script is the first process of a supervised container (under the
// engine's init, which reaps the orphans of a killed server). It reads one
// command a line and answers each with one line on stdout:
//
//	write FILE    the lines that follow, up to one that is ".", become FILE
//	run ARGS...   run ARGS to its end: "ok", or "failed: N" (its exit status)
//	start ARGS... start ARGS in the background, the server: its pid
//	kill          SIGKILL the server and wait for its exit
//	signal SIG PIDS...  kill -SIG PIDS: "ok", or what failed
//	alive         "yes" if the server runs, else "no"
//	ps            /proc/N/stat of every process, each followed by ";"
//
// What the programs print goes to the shell's stderr, which the
// container's log keeps. Arguments are split on spaces, unquoted, and
// not expanded as file name patterns (set -f; the ps loop turns it off
// for its own pattern).
const Script = `set -f
pid=
while IFS= read -r cmd; do
	case $cmd in
	"write "*)
		f=${cmd#write }
		: >"$f"
		while IFS= read -r l && [ "$l" != . ]; do printf '%s\n' "$l" >>"$f"; done
		echo ok;;
	"run "*)
		if ${cmd#run } </dev/null >&2; then echo ok; else echo "failed: $?"; fi;;
	"start "*)
		${cmd#start } </dev/null >&2 &
		pid=$!
		echo "$pid";;
	kill)
		if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null; wait "$pid"; fi
		pid=
		echo ok;;
	"signal "*)
		set -- ${cmd#signal }
		s=$1
		shift
		if kill -"$s" "$@" 2>/dev/null; then echo ok; else echo "kill -$s $* failed"; fi;;
	alive)
		st=
		[ -z "$pid" ] || read -r _ _ st _ 2>/dev/null <"/proc/$pid/stat"
		if [ -n "$st" ] && [ "$st" != Z ]; then echo yes; else echo no; fi;;
	ps)
		out=
		set +f
		for p in /proc/[0-9]*; do
			l=
			read -r l 2>/dev/null <"$p/stat" && out="$out$l;"
		done
		set -f
		echo "$out";;
	*)
		echo "unknown command: $cmd";;
	esac
done
`

// Container is a supervised container on a Network.
type Container struct {
	n  *Network
	mu sync.Mutex // Remove's
	// ID and Name are the engine's; IP its address on the network, which
	// the host reaches.
	ID   string
	Name string
	IP   string
	Sup  *Supervisor
}

// Spec is what Run makes a container of.
type Spec struct {
	// Name ends the container's name: "<network>-<Name>".
	Name  string
	Image string
	// User runs the supervisor and its server ("uid:gid"); "" is root.
	User string
	// Tmpfs are file systems in memory: path → mount options.
	Tmpfs map[string]string
}

// Run creates and starts a container of spec on n, attaches to its
// supervisor, and returns it once its address is known. On failure it
// removes what it made.
func (n *Network) Run(ctx context.Context, spec Spec) (_ *Container, err error) {
	cli := n.Pool.Client
	c := &Container{n: n, Name: n.Name + "-" + spec.Name}
	defer func() {
		if err != nil {
			c.Remove()
		}
	}()
	labels := map[string]string{}
	for k, v := range n.Labels {
		labels[k] = v
	}
	created, err := cli.CreateContainer(dc.CreateContainerOptions{
		Name: c.Name,
		Config: &dc.Config{
			Image: spec.Image, Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{Script},
			OpenStdin: true, User: spec.User, Labels: labels, Hostname: spec.Name,
		},
		HostConfig: &dc.HostConfig{NetworkMode: n.Name, Init: true, Tmpfs: spec.Tmpfs},
		// Not cut short by ctx: a container created after all must get
		// its id recorded, for Remove.
		Context: context.WithoutCancel(ctx),
	})
	if err != nil {
		return nil, fmt.Errorf("docker: creating container %s: %w", c.Name, err)
	}
	c.ID = created.ID
	if err := n.endpoints.Add(func() error { return cli.StartContainerWithContext(c.ID, nil, ctx) }); err != nil {
		return nil, fmt.Errorf("docker: starting container %s: %w", c.Name, err)
	}
	if c.Sup, err = Attach(cli, c.ID); err != nil {
		return nil, fmt.Errorf("docker: attaching to container %s: %w", c.Name, err)
	}
	info, err := cli.InspectContainerWithContext(c.ID, ctx)
	if err != nil {
		return nil, fmt.Errorf("docker: inspecting container %s: %w", c.Name, err)
	}
	if ep := info.NetworkSettings.Networks[n.Name]; ep.IPAddress != "" {
		c.IP = ep.IPAddress
	} else {
		return nil, fmt.Errorf("docker: container %s has no address on %s", c.Name, n.Name)
	}
	return c, nil
}

// Start starts args as the container's server and returns its pid in the
// container. The supervisor splits its command line on spaces: no
// argument may hold one.
func (c *Container) Start(ctx context.Context, args ...string) (int, error) {
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n") {
			return 0, fmt.Errorf("docker: container %s: argument %q: empty or with white space, which the supervisor cannot pass", c.Name, a)
		}
	}
	a, err := c.Sup.Do(ctx, "start "+strings.Join(args, " "), nil)
	if err != nil {
		return 0, fmt.Errorf("docker: container %s: %w", c.Name, err)
	}
	pid, err := strconv.Atoi(a)
	if err != nil {
		return 0, fmt.Errorf("docker: container %s: start %s: %s", c.Name, args[0], a)
	}
	return pid, nil
}

// Supervised reports whether the container's supervisor is reached: not
// once Remove ran.
func (c *Container) Supervised() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Sup != nil
}

// String names the container.
func (c *Container) String() string { return c.Name }

// Do sends cmd to the supervisor and expects "ok".
func (c *Container) Do(ctx context.Context, cmd string, body []string) error {
	if err := c.Sup.OK(ctx, cmd, body); err != nil {
		return fmt.Errorf("docker: container %s: %w", c.Name, err)
	}
	return nil
}

// Alive reports whether the server runs (a stopped one does).
func (c *Container) Alive(ctx context.Context) (bool, error) {
	a, err := c.Sup.Do(ctx, "alive", nil)
	return a == "yes", err
}

// Procs lists the container's processes.
func (c *Container) Procs(ctx context.Context) ([]procid.Proc, error) {
	a, err := c.Sup.Do(ctx, "ps", nil)
	if err != nil {
		return nil, fmt.Errorf("docker: container %s: %w", c.Name, err)
	}
	return parseProcs(a), nil
}

// parseProcs reads the answer to "ps": /proc/N/stat lines, each followed
// by ";". A line it cannot read (a process that exited while it was read)
// is left out.
func parseProcs(a string) []procid.Proc {
	var out []procid.Proc
	for _, l := range strings.Split(a, ";") {
		open, end := strings.IndexByte(l, '('), strings.LastIndexByte(l, ')')
		if open < 0 || end < open {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(l[:open]))
		f := strings.Fields(l[end+1:])
		if err != nil || len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out = append(out, procid.Proc{Pid: pid, PPid: ppid, Comm: l[open+1 : end], State: f[0]})
	}
	return out
}

// LogTail returns the last n lines the container's programs wrote (its
// stderr: its stdout holds the supervisor's answers).
func (c *Container) LogTail(n int) string {
	if c.ID == "" {
		return "(no container)"
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.n.Pool.Client.Logs(dc.LogsOptions{
		Context: ctx, Container: c.ID, OutputStream: &out, ErrorStream: &out,
		Stderr: true, Tail: strconv.Itoa(n),
	})
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return strings.TrimRight(out.String(), "\n")
}

// Remove removes the container (force: whatever runs in it dies). It is
// safe to call more than once.
func (c *Container) Remove() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Sup != nil {
		c.Sup.Close()
		c.Sup = nil
	}
	if c.ID == "" {
		return nil
	}
	if err := c.n.endpoints.RemoveContainer(context.Background(), c.n.Pool.Client, c.ID, c.n.ID); err != nil {
		return fmt.Errorf("docker: removing container %s: %w", c.Name, err)
	}
	c.ID = ""
	return nil
}

// Watch asks exited every interval whether a container's server is gone,
// and closes gone once it says so or ctx ends: a wait for the server to
// come up selects on it as on a local process's exit. stop ends the
// asking.
func Watch(ctx context.Context, every time.Duration, exited func(context.Context) bool) (gone <-chan struct{}, stop func()) {
	g := make(chan struct{})
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				close(g)
				return
			case <-time.After(every):
			}
			if exited(ctx) {
				close(g)
				return
			}
		}
	}()
	return g, sync.OnceFunc(func() { close(done) })
}
