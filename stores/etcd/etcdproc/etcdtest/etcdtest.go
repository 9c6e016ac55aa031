// Package etcdtest gives tests throwaway etcd clusters (etcdproc) that
// close when the test ends. It fails the test with an install hint where
// etcd is missing: a lock tested against no server proves nothing.
package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab/stores/etcd/etcdproc"
)

// startTimeout bounds a cluster's start.
const startTimeout = time.Minute

// Start starts a cluster with opts; it is closed when the test ends.
func Start(tb testing.TB, opts etcdproc.Options) *etcdproc.Cluster {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := etcdproc.Start(ctx, opts)
	if err != nil {
		tb.Fatalf("starting etcd: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// Client opens a client on every member of c (etcdproc.ClientConfig); it
// is closed when the test ends.
func Client(tb testing.TB, c *etcdproc.Cluster) *clientv3.Client {
	tb.Helper()
	cli, err := c.Client()
	if err != nil {
		tb.Fatalf("etcd client on %v: %v", c.Endpoints(), err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}
