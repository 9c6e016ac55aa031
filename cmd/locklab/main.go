// Command locklab races the historical Redis locking algorithms, and the
// locks of etcd, PostgreSQL and ZooKeeper, on real servers and shows which
// of them break, under which schedule or fault. It is package cli's Main:
// see there for the commands, and for the same command line on a lock of
// one's own.
package main

import "github.com/locklab/locklab/cli"

func main() { cli.Main() }
