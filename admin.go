package riffle

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Admin manages topics, configs, offsets and consumer groups, and inspects
// transactions. Get one from Client.Admin; it shares the client's
// connections. Methods that act on several topics (groups, partitions,
// transactional ids) return one result per item: a failure for one never
// hides the outcome for the others. The method's own error is reserved
// for failures of the whole call (unreachable cluster, context ended).
type Admin struct{ c *Client }

// Admin returns the admin API of the client.
func (c *Client) Admin() *Admin { return &Admin{c} }

// TopicSpec describes a topic to create.
type TopicSpec struct {
	Name string
	// Partitions; -1 or 0 uses the broker default (num.partitions).
	Partitions int32
	// ReplicationFactor; -1 or 0 uses the broker default.
	ReplicationFactor int16
	// Configs are topic configs, e.g. "cleanup.policy": "compact".
	Configs map[string]string
}

// TopicResult is the outcome of an admin operation for one topic. Err is nil
// on success or a *KafkaError (match with errors.Is, e.g.
// ErrTopicAlreadyExists).
type TopicResult struct {
	Topic string
	Err   error
}

// TopicResults is one result per topic, in request order.
type TopicResults []TopicResult

// Err joins the per-topic errors (nil if every topic succeeded).
func (rs TopicResults) Err() error {
	var all []error
	for _, r := range rs {
		if r.Err != nil {
			all = append(all, fmt.Errorf("topic %q: %w", r.Topic, r.Err))
		}
	}
	return errors.Join(all...)
}

// controllerRequest sends req to the controller (which KRaft clusters may
// forward), retrying NOT_CONTROLLER after a metadata refresh, and falling
// back to any broker when the controller is unknown (-1) or is not among the
// brokers the metadata lists: KRaft brokers report a random broker or an
// unreachable controller id, and forward controller requests themselves.
func (a *Admin) controllerRequest(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cl := a.c.cl
	var resp kmsg.Response
	err := cl.Retry(ctx, func(ctx context.Context) error {
		snap := cl.Snapshot()
		if _, ok := snap.Brokers[snap.Controller]; !ok {
			var err error
			if snap, err = cl.RefreshOnce(ctx); err != nil {
				return err
			}
		}
		var err error
		if _, ok := snap.Brokers[snap.Controller]; ok {
			resp, err = cl.Request(ctx, snap.Controller, cluster.ClassOther, req)
		} else {
			resp, err = cl.RequestAnyOnce(ctx, req)
		}
		if err != nil {
			if errs.IsRetriable(err) {
				cl.TriggerMetadata()
			}
			return err
		}
		return nil
	})
	return resp, err
}

// CreateTopics creates topics. An existing topic reports
// ErrTopicAlreadyExists in its result. ValidateOnly().CreateTopics checks
// the topics without creating them.
func (a *Admin) CreateTopics(ctx context.Context, topics ...TopicSpec) (TopicResults, error) {
	return a.createTopics(ctx, topics, false)
}

func (a *Admin) createTopics(ctx context.Context, topics []TopicSpec, validateOnly bool) (TopicResults, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(a.c.cfg.requestTimeout.Milliseconds())
	req.ValidateOnly = validateOnly
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = t.Name
		rt.NumPartitions = orMinus1(t.Partitions)
		rt.ReplicationFactor = int16(orMinus1(int32(t.ReplicationFactor)))
		keys := make([]string, 0, len(t.Configs))
		for k := range t.Configs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name = k
			c.Value = kmsg.StringPtr(t.Configs[k])
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
	}
	var send kmsg.Request = req
	if validateOnly {
		// CreateTopics v0 has no ValidateOnly: the broker would create
		// the topics.
		send = minVersionRequest{req, 1}
	}
	return a.topicOp(ctx, send, func(resp kmsg.Response) map[string]error {
		out := map[string]error{}
		for _, t := range resp.(*kmsg.CreateTopicsResponse).Topics {
			out[t.Topic] = withMessage(t.ErrorCode, t.ErrorMessage)
		}
		return out
	}, names(topics), validateOnly)
}

// DeleteTopics deletes topics.
func (a *Admin) DeleteTopics(ctx context.Context, topics ...string) (TopicResults, error) {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = int32(a.c.cfg.requestTimeout.Milliseconds())
	req.TopicNames = topics
	for _, t := range topics {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	return a.topicOp(ctx, req, func(resp kmsg.Response) map[string]error {
		out := map[string]error{}
		for _, t := range resp.(*kmsg.DeleteTopicsResponse).Topics {
			if t.Topic != nil {
				out[*t.Topic] = withMessage(t.ErrorCode, t.ErrorMessage)
			}
		}
		return out
	}, topics, false)
}

// CreatePartitions raises the partition count of topics to total.
// ValidateOnly().CreatePartitions checks the change without making it.
func (a *Admin) CreatePartitions(ctx context.Context, total int32, topics ...string) (TopicResults, error) {
	return a.createPartitions(ctx, total, topics, false)
}

func (a *Admin) createPartitions(ctx context.Context, total int32, topics []string, validateOnly bool) (TopicResults, error) {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = int32(a.c.cfg.requestTimeout.Milliseconds())
	req.ValidateOnly = validateOnly
	for _, t := range topics {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic = t
		rt.Count = total
		req.Topics = append(req.Topics, rt)
	}
	return a.topicOp(ctx, req, func(resp kmsg.Response) map[string]error {
		out := map[string]error{}
		for _, t := range resp.(*kmsg.CreatePartitionsResponse).Topics {
			out[t.Topic] = withMessage(t.ErrorCode, t.ErrorMessage)
		}
		return out
	}, topics, validateOnly)
}

// topicOp sends a per-topic controller request, retries topics whose error
// is retriable (NOT_CONTROLLER, timeouts) and returns a result per topic.
// A validate-only request changes nothing, so the metadata stays as is.
func (a *Admin) topicOp(ctx context.Context, req kmsg.Request, parse func(kmsg.Response) map[string]error, topics []string, validateOnly bool) (TopicResults, error) {
	resp, err := a.controllerRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	got := parse(resp)
	results := make(TopicResults, len(topics))
	for i, t := range topics {
		e, ok := got[t]
		if !ok {
			e = fmt.Errorf("%w: no result for topic in the response", errs.ErrMalformed)
		}
		results[i] = TopicResult{Topic: t, Err: e}
	}
	if !validateOnly {
		// Topic creation changes what lookups should see; refresh soon.
		a.c.cl.TriggerMetadata()
	}
	return results, nil
}

func names(ts []TopicSpec) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func orMinus1(n int32) int32 {
	if n <= 0 {
		return -1
	}
	return n
}

// withMessage returns the Kafka error for code, with the broker's message
// attached when it adds something.
func withMessage(code int16, msg *string) error {
	err := kafkaerr.ForCode(code)
	// Kafka sends the code's own description when it has nothing
	// more to say (Errors.message()): that adds nothing.
	if err == nil || msg == nil || *msg == "" || strings.Contains(err.Error(), *msg) {
		return err
	}
	return fmt.Errorf("%w: %s", err, *msg)
}

// PartitionDetail describes one partition.
type PartitionDetail struct {
	Partition   int32
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Offline     []int32
	Err         error
}

// TopicDetail describes one topic.
type TopicDetail struct {
	Name       string
	ID         [16]byte
	Internal   bool
	Partitions []PartitionDetail
	// AuthorizedOperations are what the client's principal may do with
	// the topic; not Known unless DescribeTopics was given
	// IncludeAuthorizedOperations and the broker reported them.
	AuthorizedOperations ACLOperationSet
	// Err is the topic's error, e.g. ErrUnknownTopicOrPartition.
	Err error
}

// ListTopics returns details of the named topics, or of every topic when
// none is named, sorted by name. Unknown named topics carry
// ErrUnknownTopicOrPartition. DescribeTopics is ListTopics with options.
func (a *Admin) ListTopics(ctx context.Context, topics ...string) ([]TopicDetail, error) {
	return a.DescribeTopics(ctx, topics)
}

// DescribeTopics returns details of the named topics, or of every topic
// when none is named, sorted by name, as ListTopics does (Java's
// describeTopics). With IncludeAuthorizedOperations each topic's
// AuthorizedOperations lists what the client's principal may do with it
// (Kafka 2.3+, Metadata v8).
func (a *Admin) DescribeTopics(ctx context.Context, topics []string, opts ...DescribeOption) ([]TopicDetail, error) {
	o := describeOptionsOf(opts)
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = o.authorizedOps
	if len(topics) > 0 {
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	} else {
		req.Topics = nil // all topics
	}
	resp, err := a.c.cl.RequestAny(ctx, req)
	if err != nil {
		return nil, err
	}
	mr := resp.(*kmsg.MetadataResponse)
	out := make([]TopicDetail, 0, len(mr.Topics))
	for _, t := range mr.Topics {
		if t.Topic == nil {
			continue
		}
		d := TopicDetail{Name: *t.Topic, ID: t.TopicID, Internal: t.IsInternal, Err: kafkaerr.ForCode(t.ErrorCode)}
		if o.authorizedOps && mr.Version >= 8 {
			d.AuthorizedOperations = aclOperationsOf(t.AuthorizedOperations)
		}
		for _, p := range t.Partitions {
			d.Partitions = append(d.Partitions, PartitionDetail{
				Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: p.Replicas, ISR: p.ISR, Offline: p.OfflineReplicas, Err: kafkaerr.ForCode(p.ErrorCode),
			})
		}
		sort.Slice(d.Partitions, func(i, j int) bool { return d.Partitions[i].Partition < d.Partitions[j].Partition })
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Special timestamps for ListOffsets.
const (
	// OffsetLatest asks for the next offset to be written (the high
	// watermark, or the last stable offset under read_committed).
	OffsetLatest int64 = -1
	// OffsetEarliest asks for the log start offset.
	OffsetEarliest int64 = -2
)

// ListedOffset is the answer of ListOffsets for one partition.
type ListedOffset struct {
	Topic       string
	Partition   int32
	Offset      int64 // -1 when no record matches a timestamp query
	Timestamp   int64
	LeaderEpoch int32
	Err         error
}

// ListOffsets returns, for every partition of the topics, the earliest
// offset (timestamp OffsetEarliest), the latest (OffsetLatest), or the
// first offset whose record timestamp is at or after timestamp (millis).
// Requests go to each partition's leader in parallel; a partition whose
// leader moved is retried after a metadata refresh. The offsets are read
// uncommitted: OffsetLatest is the high watermark (ListOffsetsIsolated
// with ReadCommitted gives the last stable offset).
func (a *Admin) ListOffsets(ctx context.Context, timestamp int64, topics ...string) ([]ListedOffset, error) {
	return a.ListOffsetsIsolated(ctx, ReadUncommitted, timestamp, topics...)
}

// ListOffsetsIsolated is ListOffsets at an isolation level (Java's
// ListOffsetsOptions.isolationLevel). Under ReadCommitted, OffsetLatest
// is the last stable offset: below the first record of a transaction
// still open, where a read_committed consumer's reading ends for now;
// timestamp queries find only offsets below it.
func (a *Admin) ListOffsetsIsolated(ctx context.Context, isolation IsolationLevel, timestamp int64, topics ...string) ([]ListedOffset, error) {
	if isolation != ReadUncommitted && isolation != ReadCommitted {
		return nil, fmt.Errorf("%w: ListOffsetsIsolated: isolation level %d is neither ReadUncommitted nor ReadCommitted", ErrInvalidConfig, isolation)
	}
	cl := a.c.cl
	type tp struct {
		t string
		p int32
	}
	var all []tp
	for _, t := range topics {
		tm, err := cl.LookupTopic(ctx, t)
		if err != nil {
			return nil, err
		}
		for _, p := range tm.Partitions {
			all = append(all, tp{t, p.Partition})
		}
	}
	results := make(map[tp]ListedOffset, len(all))
	pending := all
	err := cl.Retry(ctx, func(ctx context.Context) error {
		byLeader := map[int32][]tp{}
		var lastErr error
		for _, x := range pending {
			pm, err := cl.Leader(ctx, x.t, x.p)
			if err != nil {
				results[x] = ListedOffset{Topic: x.t, Partition: x.p, Offset: -1, Err: err}
				lastErr = err
				continue
			}
			byLeader[pm.Leader] = append(byLeader[pm.Leader], x)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		var retry []tp
		for leader, tps := range byLeader {
			wg.Add(1)
			go func() {
				defer wg.Done()
				qs := make([]offsetsQuery, len(tps))
				for i, x := range tps {
					qs[i] = offsetsQuery{topic: x.t, partition: x.p, timestamp: timestamp, leaderEpoch: -1}
				}
				req := listOffsetsRequest(qs, isolation)
				resp, err := cl.Request(ctx, leader, cluster.ClassOther, req)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					lastErr = err
					if errs.IsRetriable(err) {
						retry = append(retry, tps...)
					} else {
						for _, x := range tps {
							results[x] = ListedOffset{Topic: x.t, Partition: x.p, Offset: -1, Err: err}
						}
					}
					return
				}
				for _, rt := range resp.(*kmsg.ListOffsetsResponse).Topics {
					for _, rp := range rt.Partitions {
						x := tp{rt.Topic, rp.Partition}
						e := kafkaerr.ForCode(rp.ErrorCode)
						if e != nil && kafkaerr.Typed(rp.ErrorCode).Retriable {
							retry = append(retry, x)
							lastErr = e
							continue
						}
						results[x] = ListedOffset{Topic: x.t, Partition: x.p, Offset: rp.Offset, Timestamp: rp.Timestamp, LeaderEpoch: rp.LeaderEpoch, Err: e}
					}
				}
			}()
		}
		wg.Wait()
		if len(retry) > 0 {
			pending = retry
			cl.TriggerMetadata()
			return fmt.Errorf("list offsets: %d partitions to retry: %w", len(retry), lastErr)
		}
		return nil
	})
	if err != nil && ctx.Err() != nil {
		return nil, err
	}
	out := make([]ListedOffset, 0, len(all))
	for _, x := range all {
		r, ok := results[x]
		if !ok {
			r = ListedOffset{Topic: x.t, Partition: x.p, Offset: -1, Err: err}
		}
		out = append(out, r)
	}
	return out, nil
}
