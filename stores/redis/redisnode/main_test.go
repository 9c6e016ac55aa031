package redisnode

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/locklab/locklab/internal/tooling/backends"
)

const childEnv = "LOCKLAB_NODE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild()
		return
	}
	code := m.Run()
	if left := leftovers(); left != "" {
		fmt.Fprintln(os.Stderr, "left behind after the tests:", left)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// runChild starts a docker cluster of two nodes (or, when the child
// variable names a backend, a cluster of one node and a Sentinel group on
// that backend; when it is a backend and "-rcluster", a cluster of one node
// and a Redis Cluster), says READY and waits to be killed.
func runChild() {
	ctx := context.Background()
	be, n := backends.Docker, 2
	sentinels, rcluster := false, false
	if v := os.Getenv(childEnv); v == backends.Docker || v == backends.Process {
		be, n, sentinels = v, 1, true
	}
	if v, ok := strings.CutSuffix(os.Getenv(childEnv), "-rcluster"); ok {
		be, n, rcluster = v, 1, true
	}
	c, err := Start(ctx, Options{Backend: be, N: n, Label: "child"})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	if sentinels {
		if _, err := c.StartSentinels(ctx, SentinelOptions{}); err != nil {
			fmt.Println("ERROR", err)
			os.Exit(2)
		}
	}
	if rcluster {
		if _, err := c.StartRedisCluster(ctx, RedisClusterOptions{}); err != nil {
			fmt.Println("ERROR", err)
			os.Exit(2)
		}
	}
	fmt.Println("READY", c.Describe())
	select {}
}

// leftovers lists the containers, networks and redis-server processes this
// test process still owns.
func leftovers() string {
	var out []string
	if pool, err := dockerClient(context.Background()); err == nil {
		cs, ns := ownedBy(pool.Client, os.Getpid())
		for _, c := range cs {
			out = append(out, "container "+c)
		}
		for _, n := range ns {
			out = append(out, "network "+n)
		}
	}
	ents, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || !strings.Contains(s[:i], "redis-server") {
			continue
		}
		if f := strings.Fields(s[i+1:]); len(f) > 2 && f[1] == me && f[0] != "Z" {
			out = append(out, "process "+e.Name())
		}
	}
	return strings.Join(out, ", ")
}

// ownedBy lists the names of the containers and networks labelled with pid.
func ownedBy(cli *dc.Client, pid int) (containers, networks []string) {
	lbl := LabelPid + "=" + strconv.Itoa(pid)
	cs, _ := cli.ListContainers(dc.ListContainersOptions{All: true, Filters: map[string][]string{"label": {lbl}}})
	for _, c := range cs {
		containers = append(containers, strings.Join(c.Names, ","))
	}
	ns, _ := cli.FilteredListNetworks(dc.NetworkFilterOpts{"label": {lbl: true}})
	for _, n := range ns {
		networks = append(networks, n.Name)
	}
	return containers, networks
}
