module github.com/locklab/locklab/bench

go 1.26.0

replace github.com/locklab/locklab => ../

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/gomodule/redigo v1.9.3
	github.com/locklab/locklab v0.0.0
	github.com/locklab/locklab/adapters/goredis v0.0.0
	github.com/locklab/locklab/adapters/rueidis v0.0.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redis/rueidis v1.0.79
	github.com/redis/rueidis/rueidiscompat v1.0.79
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/mna/redisc v1.4.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace github.com/locklab/locklab/adapters/goredis => ../adapters/goredis

replace github.com/locklab/locklab/adapters/rueidis => ../adapters/rueidis
