module github.com/locklab/locklab/adapters/goredis

go 1.26.0

replace github.com/locklab/locklab => ../..

require (
	github.com/gomodule/redigo v1.9.3
	github.com/locklab/locklab v0.0.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/mna/redisc v1.4.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
