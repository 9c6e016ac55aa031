// The Redis store's Driver: Redis registers itself as the other stores do
// (RegisterStore), as the Main store, whose servers are the nodes the
// harness is given.

package harness

import (
	"github.com/locklab/locklab/harness/node"
	"github.com/locklab/locklab/strategies"
)

// RedisStore is the Redis store's name.
const RedisStore = node.StoreName

func init() {
	RegisterStore(&Driver{
		Name:  RedisStore,
		Title: "Redis",
		Families: []string{strategies.FamilySetNXGetSet, strategies.FamilyIncrExpire, strategies.FamilySetNXEx,
			strategies.FamilyRedlock, strategies.FamilyReentrant},
		Main:    true,
		Workers: true,
		Open: func(nodes []Node, o OpenOptions) (Store, error) {
			return newRedisStore(nodes, o.Worker, o.Direct), nil
		},
		// The order the docs present the Redis strategies in, the
		// historical progression of docs/redis-locks-history.md.
		Columns: []string{"setnx-del", "setnx-getset", "setnx-getset-lua", "setnx-forever", "incr-expire", "incr-expire-lua", "incr-expire-multi",
			"setnx-expire", "setnx-expire-always", "set-nx-px-del", "set-nx-px-getdel", "set-nx-px", "redlock"},
	})
}
