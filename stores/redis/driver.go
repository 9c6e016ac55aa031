// Package redis is the Redis store of the harness: the database (or, on a
// server the harness does not own, the namespace) a slot's runs lock in on
// each Redis node, the connections its clients' strategies get, each
// command a step, and what each command reads and writes. Importing it
// registers it with the harness (harness.RegisterStore) as the Main store,
// whose servers are the nodes the harness is given (its redisnode package
// starts them, and its Driver's StartNodes).
//
//	driver.go  the store's Driver
//	known.go   the schedules each cell replays before its search (Driver.Known)
//	store.go   a slot's store: its pools, emptying, time, probing the lock
//	conn.go    the connection wrapper: every command a step, on a harness.Conn
//	nodes.go   the servers a matrix of its strategies and play's levels run on
//	touch.go   what each command reads and writes, a transaction's at EXEC
//	audit.go   the servers' own count of the connections they accepted
//	levels.go  its challenges in locklab play, the game's first
//	stress.go  its part of stress mode (harness/stress): plain nodes, node faults
//	stressfailover.go, stresscluster.go  a Sentinel group's and a Redis Cluster's failover in stress mode
package redis

import (
	"context"
	"fmt"
	"slices"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/harness/fault"
	"github.com/locklab/locklab/stores/redis/redisnode"
	"github.com/locklab/locklab/strategies"
)

// Name is the Redis store's name, as redisnode's nodes say it.
const Name = redisnode.StoreName

// families are the families of the strategies that lock on Redis: the
// store's Driver and its part of stress mode each claim them.
var families = []string{strategies.FamilySetNXGetSet, strategies.FamilyIncrExpire, strategies.FamilySetNXEx,
	strategies.FamilyRedlock, strategies.FamilyReentrant}

func init() {
	harness.RegisterStore(&harness.Driver{
		Name:     Name,
		Title:    "Redis",
		Families: families,
		Main:     true,
		Stress:   stressDriver,
		Workers:  true,
		StartNodes: func(ctx context.Context, o harness.NodesOptions) (*harness.StartedNodes, error) {
			return startNodes(ctx, redisnode.Options{Backend: o.Backend, Image: o.Image, N: o.N, Label: o.Label}, o.Replica)
		},
		Open: func(nodes []harness.Node, o harness.OpenOptions) (harness.Store, error) {
			return newRedisStore(nodes, o.Worker, o.Direct), nil
		},
		Audit:      startAudit,
		NA:         na,
		Known:      known,
		PlayLevels: playLevels,
		PlayServers: func(nodes int, replica bool) string {
			s := fmt.Sprintf("%d Redis nodes", nodes)
			if nodes == 1 {
				s = "1 Redis node"
			}
			if replica {
				s += ", n1 with an asynchronous replica"
			}
			return s
		},
		Guards:    guards,
		Unguarded: map[string]string{"redlock": unguardedRedlock},
		// The order the docs present the Redis strategies in, the
		// historical progression of docs/redis-locks-history.md.
		Columns: []string{"setnx-del", "setnx-getset", "setnx-getset-lua", "setnx-forever", "incr-expire", "incr-expire-lua", "incr-expire-multi",
			"setnx-expire", "setnx-expire-always", "set-nx-px-del", "set-nx-px-getdel", "set-nx-px", "redlock"},
	})
}

// na says why a scenario has no meaning on Redis: one of a cluster whose
// members agree on every write (member-loses-data).
func na(sc *harness.Scenario) string {
	if slices.Contains(sc.Needs, fault.MemberLoss) {
		return "a story of a consensus cluster's members: a Redis lock lives on one server, or on independent masters " +
			"(Redlock), whose replicas acknowledge nothing unless asked (WAIT), with no quorum to lose a member of: " +
			"restart-loses-lock and failover-loses-lock tell how it loses a lock"
	}
	return ""
}
