// A hosted ensemble: its servers run as peers of one JVM (host/ZkHost.java),
// which stays up while a fault kills and restarts them.

package zkproc

import (
	"bufio"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/locklab/locklab/internal/tooling/procid"
	"github.com/locklab/locklab/internal/tooling/serverproc"
)

// hostClasses are ZkHost's classes, compiled for Java 11 so that the JRE
// that runs ZooKeeper runs them (a JRE has no javac). host/ZkHost.sum is
// the source's SHA-256 they were compiled from; TestHostClassesCurrent
// holds them to it.
//
//go:generate sh -c "javac --release 11 -Xlint:all,-path -cp /usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar -d host host/ZkHost.java && sha256sum host/ZkHost.java > host/ZkHost.sum"
//go:embed host/*.class
var hostClasses embed.FS

// ErrHosted is the error of a fault a hosted server cannot take: its
// peers share its process, so it cannot be paused (SIGSTOP) alone.
var ErrHosted = errors.New("zkproc: a server of a hosted ensemble shares its JVM with its peers and cannot be paused alone")

// host is the JVM of a hosted ensemble, and its conversation: each
// command a line on its standard input with a tag, each answer a line on
// its standard output with the tag; a peer that ends of itself is told
// with the tag "-".
type host struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	logPath string
	done    chan struct{} // closed once the JVM has exited

	mu      sync.Mutex
	next    int
	waiting map[string]chan string // tag: its answer's rest ("ok", "err why")
	running map[int]bool           // peers started and not ended
	exited  bool
}

// startHost writes ZkHost's classes into dir/host and starts the JVM,
// its log appended to logPath.
func (e *Ensemble) startHost(logPath string) (*host, error) {
	cdir := filepath.Join(e.Dir, "host")
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return nil, err
	}
	files, err := hostClasses.ReadDir("host")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		b, err := hostClasses.ReadFile("host/" + f.Name())
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(cdir, f.Name()), b, 0o644); err != nil {
			return nil, err
		}
	}
	args := append(append([]string{e.Java}, e.archive.flags(e.inst)...), e.jvmArgs(e.classpath+":"+cdir, filepath.Dir(logPath), "ZkHost")...)
	cmd := serverproc.Spec{Local: args, Dir: e.Dir, DropEnv: javaOptions}.Command()
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd.Stderr = log
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("zkproc: the ensemble's JVM: %w", err)
	}
	h := &host{cmd: cmd, stdin: stdin, logPath: logPath, done: make(chan struct{}),
		waiting: map[string]chan string{}, running: map[int]bool{}}
	go h.read(stdout)
	return h, nil
}

// read dispatches the JVM's answers until it exits.
func (h *host) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		tag, rest, _ := strings.Cut(sc.Text(), " ")
		h.mu.Lock()
		if tag == "-" {
			if f := strings.Fields(rest); len(f) >= 2 && f[0] == "exit" {
				if id, err := strconv.Atoi(f[1]); err == nil {
					h.running[id] = false
				}
			}
		} else if ch, ok := h.waiting[tag]; ok {
			delete(h.waiting, tag)
			ch <- rest
		}
		h.mu.Unlock()
	}
	h.cmd.Wait()
	h.mu.Lock()
	h.exited = true
	clear(h.running)
	for tag, ch := range h.waiting {
		delete(h.waiting, tag)
		ch <- "err the ensemble's JVM exited"
	}
	h.mu.Unlock()
	close(h.done)
}

// do sends the command words to the JVM and waits for its answer, until
// ctx ends: a JVM that does not answer in time is killed, with every
// peer, as a server that hangs would be.
func (h *host) do(ctx context.Context, words ...string) error {
	h.mu.Lock()
	if h.exited {
		h.mu.Unlock()
		return errors.New("zkproc: the ensemble's JVM exited")
	}
	h.next++
	tag := strconv.Itoa(h.next)
	ch := make(chan string, 1)
	h.waiting[tag] = ch
	_, err := io.WriteString(h.stdin, tag+" "+strings.Join(words, " ")+"\n")
	h.mu.Unlock()
	if err != nil {
		return fmt.Errorf("zkproc: the ensemble's JVM: %w", err)
	}
	select {
	case a := <-ch:
		if why, ok := strings.CutPrefix(a, "err "); ok {
			return fmt.Errorf("zkproc: %s: %s", strings.Join(words[:2], " "), why)
		}
		return nil
	case <-ctx.Done():
		h.kill()
		return fmt.Errorf("zkproc: %s: the ensemble's JVM did not answer: %w", strings.Join(words[:2], " "), ctx.Err())
	}
}

// kill kills the JVM (SIGKILL) and waits for it to exit.
func (h *host) kill() {
	h.cmd.Process.Kill()
	<-h.done
}

// peer is the server of myid in the JVM: the Box its Proc runs in.
type peer struct {
	h  *host
	id int
}

// Start starts the peer from its zoo.cfg (args: the config's path) and
// returns its myid for a pid, once it runs.
func (p *peer) Start(ctx context.Context, args ...string) (int, error) {
	if len(args) != 1 {
		return 0, fmt.Errorf("zkproc: a peer starts from its zoo.cfg alone, not %q", args)
	}
	if err := p.h.do(ctx, "start", strconv.Itoa(p.id), args[0]); err != nil {
		return 0, portTaken(err.Error(), err)
	}
	p.h.mu.Lock()
	p.h.running[p.id] = true
	p.h.mu.Unlock()
	return p.id, nil
}

// Do carries out "kill": the peer shut down inside the JVM, which returns
// once its threads have ended. Signals are refused (ErrHosted).
func (p *peer) Do(ctx context.Context, cmd string, _ []string) error {
	if cmd != "kill" {
		return fmt.Errorf("%w (%s)", ErrHosted, cmd)
	}
	p.h.mu.Lock()
	p.h.running[p.id] = false
	p.h.mu.Unlock()
	return p.h.do(ctx, "kill", strconv.Itoa(p.id))
}

// Alive reports whether the peer runs.
func (p *peer) Alive(context.Context) (bool, error) {
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	return p.h.running[p.id], nil
}

// Procs lists no process: the peer has none of its own.
func (p *peer) Procs(context.Context) ([]procid.Proc, error) { return nil, nil }

// Supervised reports whether the JVM runs.
func (p *peer) Supervised() bool {
	select {
	case <-p.h.done:
		return false
	default:
		return true
	}
}

// LogTail returns the last n lines of the JVM's log, every peer's.
func (p *peer) LogTail(n int) string {
	b, err := os.ReadFile(p.h.logPath)
	if err != nil {
		return ""
	}
	return procid.TailLines(string(b), n)
}

// Remove does nothing: the ensemble's Close kills the JVM.
func (p *peer) Remove() error { return nil }

// String names the peer and the JVM.
func (p *peer) String() string {
	return fmt.Sprintf("peer %d of JVM %d", p.id, p.h.cmd.Process.Pid)
}
