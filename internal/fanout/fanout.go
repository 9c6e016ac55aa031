// Package fanout lets a multi-node strategy say, in the context of each
// command of a round it sends to several nodes at once, how many nodes the
// round sends to. A scheduler that takes commands one at a time, as the
// harness does, then knows when the round's last command has come, instead
// of guessing from a quiet period how long a goroutine may be held back.
package fanout

import "context"

type key struct{}

// With returns ctx marked as a round's to n nodes.
func With(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, key{}, n)
}

// Of returns how many nodes the round ctx belongs to sends to, or 0 where
// ctx says nothing.
func Of(ctx context.Context) int {
	n, _ := ctx.Value(key{}).(int)
	return n
}
