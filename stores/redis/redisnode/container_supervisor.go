// The supervisor of a docker node: the shell that is a supervised
// container's first process, and the commands that write a configuration,
// start and kill its redis-server.

package redisnode

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/locklab/locklab/internal/tooling/dockerbox"
)

// Supervised containers. A restart of a container costs about a second
// (the engine tears down and sets up its process, mounts and network
// endpoint), and a docker exec some tens of milliseconds. So a container
// whose image has /bin/sh runs supervisorScript as its first process, a
// shell that starts and kills the container's redis-server as its child
// when told to on its stdin, which the harness keeps attached (see
// supervisor). A kill is a SIGKILL, waited for; a restart kills the server
// if it runs and starts a new one, in the same container at the same
// address: a new process, which finds nothing of its predecessor's memory,
// only the files it reads. A restart without data gives the new server a
// configuration of a new generation N, /data/rN.conf, whose RDB and
// append-only files are named rN.rdb and rN.aof: none of its predecessor's
// files is one it reads. With data the server starts again on the same
// configuration (rewritten by CONFIG REWRITE since) and so the same files.

// supervisorScript is the first process of a supervised container. It
// reads one command a line and answers each with one line on stdout:
//
//	write FILE   the lines that follow, up to one that is ".", become FILE
//	start CONF   start redis-server CONF
//	kill         SIGKILL the server and wait for its exit
//	alive        "yes" if the server runs, else "no"
//	partition    take the network interfaces (all but lo) down
//	heal GW      bring them up, with the default route through GW
//
// The server's output goes to the shell's stderr, which the container's log
// keeps.
const supervisorScript = `pid=
while IFS= read -r cmd; do
	case $cmd in
	"write "*)
		f=${cmd#write }
		: >"$f"
		while IFS= read -r l && [ "$l" != . ]; do printf '%s\n' "$l" >>"$f"; done
		echo ok;;
	"start "*)
		redis-server "${cmd#start }" </dev/null >&2 &
		pid=$!
		echo ok;;
	kill)
		if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null; wait "$pid"; fi
		pid=
		echo ok;;
	alive)
		st=
		[ -z "$pid" ] || read -r _ _ st _ 2>/dev/null <"/proc/$pid/stat"
		if [ -n "$st" ] && [ "$st" != Z ]; then echo yes; else echo no; fi;;
	partition|"heal "*)
		up=down
		[ "$cmd" = partition ] || up=up
		err=
		for i in /sys/class/net/*; do
			n=${i##*/}
			[ "$n" = lo ] || ip link set "$n" $up 2>/dev/null || err=1
		done
		[ -n "$err" ] || [ $up = down ] || ip route replace default via "${cmd#heal }" 2>/dev/null || err=1
		if [ -z "$err" ]; then echo ok; else echo "ip link set $up failed"; fi;;
	*)
		echo "unknown command: $cmd";;
	esac
done
`

// confPath is the configuration file of a supervised server of generation
// gen.
func confPath(gen int) string { return "/data/r" + strconv.Itoa(gen) + ".conf" }

// startFirst attaches to a supervised container's supervisor, which has
// just started, and starts its first server.
func (s *dockerServer) startFirst(ctx context.Context) error {
	sup, err := dockerbox.Attach(s.b.cli, s.id)
	if err != nil {
		return fmt.Errorf("docker: attaching to container %s: %w", s.container, err)
	}
	s.sup = sup
	return s.startNew(ctx)
}

// startNew starts a supervised server of a new generation: a configuration
// (from s.persistCfg) whose files no earlier server wrote.
func (s *dockerServer) startNew(ctx context.Context) error {
	s.gen++
	conf := strings.Split(strings.TrimSuffix(redisConf(s.persistCfg, s.gen)+s.extraConf, "\n"), "\n")
	if err := s.sup.OK(ctx, "write "+confPath(s.gen), conf); err != nil {
		return fmt.Errorf("docker: container %s: %w", s.container, err)
	}
	return s.startServer(ctx)
}

// startServer starts a supervised container's redis-server on the
// configuration of generation s.gen and waits until it answers. The server
// that ran before must be gone (killServer), lest its PONG be taken for the
// new one's.
func (s *dockerServer) startServer(ctx context.Context) error {
	if err := s.sup.OK(ctx, "start "+confPath(s.gen), nil); err != nil {
		return fmt.Errorf("docker: container %s: %w", s.container, err)
	}
	sup := s.sup // the check may outlive the wait, and s.sup with it
	return s.waitUp(ctx, func(ctx context.Context) bool {
		a, err := sup.Do(ctx, "alive", nil)
		return err != nil || a != "yes"
	})
}

// killServer SIGKILLs a supervised container's redis-server and waits until
// it has exited.
func (s *dockerServer) killServer(ctx context.Context) error {
	if err := s.sup.OK(ctx, "kill", nil); err != nil {
		return fmt.Errorf("docker: container %s: %w", s.container, err)
	}
	return nil
}
