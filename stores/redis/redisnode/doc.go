// Package redisnode starts, breaks and removes the real Redis servers the
// harness races locks on: the servers of Redis's store (stores/redis).
//
// # Backends
//
// Start starts a Cluster of N nodes, n1..nN, on one of three backends:
//
//   - docker: one container per node, through dockertest, on a private bridge
//     network of the cluster's own. Clients dial the container's fixed
//     address on that network, so disconnecting the container cuts them off.
//     The image is Options.Image, else $LOCKLAB_REDIS_IMAGE, else "redis:7",
//     if present locally or pullable within a few seconds; otherwise an image
//     "locklab/redis:<version>-<revision>" is built FROM scratch out of the
//     host's redis-server, /bin/sh and ip command, the shared libraries they
//     link and the dynamic loader, with no registry involved, and reused
//     afterwards. Where the image has /bin/sh, the container's first process
//     is a small shell supervisor that runs redis-server as its child and
//     kills, starts and cuts it off on commands sent to its stdin: a restart
//     is a new redis-server process in a container that stays up (a few
//     milliseconds, where restarting a container takes about a second). Every container and network
//     carries the label locklab=1 and the owning process's pid and host;
//     Start removes those whose process is gone (never those of a live one),
//     and SIGINT or SIGTERM during a run closes every open cluster before the
//     signal takes its course.
//   - process: redis-server processes on free loopback ports, each with its
//     own working directory, no persistence unless asked. Each sits behind a
//     loopback TCP proxy; clients and replicas dial the proxy.
//   - addrs: servers the user already runs, "host:port",
//     "password@host:port" or a redis:// or rediss:// URL with an ACL user,
//     a database and TLS (ParseAddr). Only faults made of commands work
//     there; the others fail with an error wrapping fault.ErrUnsupported.
//
// Options.Backend (or $LOCKLAB_BACKEND) picks one; by default docker is used
// when an engine answers, else process, else Start fails saying how to
// install either.
//
// # Faults
//
// A node implements the fault contract of harness/fault, which every
// store's nodes share: one interface per fault (fault.Pauser, Killer,
// Restarter, Partitioner, FailingOver), through which the harness and
// stress fault nodes; fault.Fault names the kinds of fault in one
// vocabulary ("pause", "kill", "restart", "restart-keep", "partition",
// "failover"), and fault.Begin and End start and end a fault on any node
// that implements it. Each fault is a method of Node:
//
//   - Pause / Resume: docker pause or SIGSTOP; connections stay open and
//     commands time out until Resume.
//   - Kill and Restart(keepData): SIGKILL, then a start at the same address
//     of a new redis-server process (on docker, in the same container when
//     its image has /bin/sh, else in the container restarted). With keepData
//     the node finds its files again, so with append-only persistence
//     (Options.AppendOnly, AppendFsync, or Node.SetAppendOnly) acknowledged
//     writes survive; without it, or without keepData, the node comes back
//     empty.
//   - Partition / Heal: the node stops answering clients and other nodes
//     (on docker its network interface goes down, or where the image has no
//     ip command the container is disconnected from the network; on the
//     process backend its proxy blackholes) and comes back.
//   - ExpireAll: time passes; every key with a TTL is removed, keys without
//     one stay. Made of commands, it works on every backend.
//   - Replica failover: Cluster.AddReplica starts a replica of a node;
//     StopReplication cuts its link, Promote makes it a master, and
//     Cluster.Failover plays the whole lost-write sequence (cut the link,
//     write, kill the master, promote).
//
// # Sentinel
//
// Cluster.StartSentinels starts a real Redis Sentinel group on the docker or
// process backend: a master ("sg1m"), replicas of it ("sg1r1", "sg1r2")
// synced over the replication link, and Sentinels ("sg1s1".."sg1s3"),
// redis-server --sentinel processes or containers monitoring the master
// with a short down-after-milliseconds (1s by default) and failover-timeout
// (3s), quorum 2. It returns once every Sentinel sees the master, each
// replica and the other Sentinels. SentinelGroup.Addrs lists the Sentinels'
// addresses for clients, Master asks them which node is the master now and
// WaitFailover waits until they have promoted another. The failover is
// Sentinel's own: kill or pause the master (the data nodes are Nodes with
// every fault, and the group itself implements Pauser, Killer, Restarter
// and FailingOver on the master the Sentinels name) and a replica is
// elected; the old master, back, is made a replica of the new one by the
// Sentinels about 10s later, then resyncs from it. That delay is no setting
// of the group's but Sentinel's own timing: it reconfigures a node back as
// a master at the first INFO reply more than 8s after the one that showed
// it so, and asks a replica for INFO every 10s. On the process backend
// every node announces its proxy's address to its master, so Sentinel
// reaches replicas, and names masters, at the addresses clients dial. The
// group's Close, like the cluster's (SIGINT and SIGTERM included), removes
// its Sentinels and data nodes; directories and containers of a killed run
// are removed on the next start like the others.
//
// Every node has a redigo Pool (a locklab.ConnSource) and Dial.
package redisnode
