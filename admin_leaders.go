package riffle

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
)

// leaderRouted sends per-partition requests to each partition's leader:
// it groups the distinct partitions all by leader, calls send once per
// leader (leaders in parallel), and retries, after a metadata refresh, the
// partitions whose reply code (per code) is retriable (the leader moved,
// NOT_LEADER_OR_FOLLOWER, timeouts) or whose leader could not be reached
// for a retriable reason, within the client's retry budget. Partitions
// the metadata does not have are answered at once (ErrUnknownTopic or
// ErrUnknownTopicOrPartition) rather than retried.
//
// It returns the final reply of every partition that got one (whatever
// its code) and, for the others, why they got none. The error is for the
// whole call: the caller's context ended or the client closed. what names
// the request in errors.
func leaderRouted[R any](ctx context.Context, a *Admin, what string, all []TopicPartition,
	send func(ctx context.Context, leader int32, tps []TopicPartition) (map[TopicPartition]R, error),
	code func(R) int16,
) (replies map[TopicPartition]R, failed map[TopicPartition]error, err error) {
	cl := a.c.cl
	replies, failed = map[TopicPartition]R{}, map[TopicPartition]error{}

	// Partitions the metadata does not have are answered now: Leader
	// would retry them until the budget runs out.
	type topicLookup struct {
		tm  *cluster.TopicMeta
		err error
	}
	topics := map[string]topicLookup{}
	var pending []TopicPartition
	for _, tp := range uniqueTPs(all) {
		t, seen := topics[tp.Topic]
		if !seen {
			t.tm, t.err = cl.LookupTopic(ctx, tp.Topic)
			if t.err != nil && (ctx.Err() != nil || errors.Is(t.err, errs.ErrClientClosed)) {
				return nil, nil, t.err
			}
			topics[tp.Topic] = t
		}
		switch _, ok := t.tm.Partition(tp.Partition); {
		case t.err != nil:
			failed[tp] = t.err
		case !ok:
			failed[tp] = fmt.Errorf("%w: %s is not in the topic's metadata", ErrUnknownTopicOrPartition, tp)
		default:
			pending = append(pending, tp)
		}
	}
	if len(pending) == 0 {
		return replies, failed, nil
	}

	err = cl.Retry(ctx, func(ctx context.Context) error {
		byLeader := map[int32][]TopicPartition{}
		for _, tp := range pending {
			pm, err := cl.Leader(ctx, tp.Topic, tp.Partition)
			if err != nil {
				failed[tp] = err // Leader retried already
				continue
			}
			byLeader[pm.Leader] = append(byLeader[pm.Leader], tp)
		}
		var (
			mu       sync.Mutex
			wg       sync.WaitGroup
			retry    []TopicPartition
			retryErr error // a retriable cause of the retries
		)
		for leader, tps := range byLeader {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := send(ctx, leader, tps)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					err = fmt.Errorf("broker %d: %w", leader, err)
					if errs.IsRetriable(err) {
						retry = append(retry, tps...)
						retryErr = err
					} else {
						for _, tp := range tps {
							failed[tp] = err
						}
					}
					return
				}
				for _, tp := range tps {
					r, ok := got[tp]
					switch {
					case !ok:
						failed[tp] = fmt.Errorf("broker %d: %w: no result for %s in the response", leader, errs.ErrMalformed, tp)
					case code(r) != 0 && kafkaerr.Typed(code(r)).Retriable:
						retry = append(retry, tp)
						retryErr = fmt.Errorf("broker %d: %s: %w", leader, tp, kafkaerr.ForCode(code(r)))
					default:
						replies[tp] = r
						delete(failed, tp)
					}
				}
			}()
		}
		wg.Wait()
		pending = retry
		if len(retry) > 0 {
			cl.TriggerMetadata()
			return fmt.Errorf("%s: %d partitions to retry: %w", what, len(retry), retryErr)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, errs.ErrClientClosed) {
			return nil, nil, err
		}
		for _, tp := range pending { // the retries gave up on these
			failed[tp] = err
		}
	}
	return replies, failed, nil
}
