package riffle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
)

// Calls that ask every broker (the groups, transactions and log
// directories each broker holds) share the fan-out below: the broker
// list, one goroutine per broker, each with its own retries, and the
// rule for a listing some brokers could not give.

// allBrokers refreshes the metadata and returns the ids of every broker,
// sorted.
func (a *Admin) allBrokers(ctx context.Context) ([]int32, error) {
	cl := a.c.cl
	if err := cl.RefreshMetadata(ctx); err != nil {
		return nil, err
	}
	snap := cl.Snapshot()
	nodes := make([]int32, 0, len(snap.Brokers))
	for id := range snap.Brokers {
		nodes = append(nodes, id)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	return nodes, nil
}

// eachBroker runs ask for every node in parallel, retrying it with the
// client's retry policy, and waits for all. ask's successful answers are
// handed to keep one at a time (keep may be nil). It returns each node's
// error, wrapped with the broker's id, in the order of nodes (nil where
// the broker answered).
func eachBroker[T any](ctx context.Context, a *Admin, nodes []int32, ask func(ctx context.Context, node int32) (T, error), keep func(node int32, answer T)) []error {
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		failed = make([]error, len(nodes))
	)
	for i, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var answer T
			err := a.c.cl.Retry(ctx, func(ctx context.Context) error {
				var err error
				answer, err = ask(ctx, node)
				return err
			})
			if err != nil {
				failed[i] = fmt.Errorf("broker %d: %w", node, err)
				return
			}
			if keep != nil {
				mu.Lock()
				defer mu.Unlock()
				keep(node, answer)
			}
		}()
	}
	wg.Wait()
	return failed
}

// incomplete is the error of a listing gathered from every broker, given
// each broker's error: nil if all answered; otherwise an error naming the
// brokers that failed, and, in partial, whether the answers of the
// others are worth returning beside it (not when ctx ended, or no broker
// answered); what names the call.
func incomplete(ctx context.Context, what string, failed []error) (partial bool, err error) {
	joined := errors.Join(failed...)
	if joined == nil {
		return true, nil
	}
	if ctx.Err() != nil || !slices.ContainsFunc(failed, func(e error) bool { return e == nil }) {
		return false, joined
	}
	return true, fmt.Errorf("%s: incomplete: %w", what, joined)
}
