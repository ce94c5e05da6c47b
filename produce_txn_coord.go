package riffle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/conn"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/riffle-go/riffle/internal/producer"
	"github.com/riffle-go/riffle/internal/txn"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The coordinator side of the transactional producer: finding the
// transaction and group coordinators, sending the transactional requests
// with retries, and classifying their answers through internal/txn.

// coordKey names a coordinator: of the transactional id (FindCoordinator
// key type 1) or of a group (type 0).
type coordKey struct {
	typ int8
	key string
}

func (k coordKey) String() string {
	if k.typ == 1 {
		return fmt.Sprintf("transaction coordinator of %q", k.key)
	}
	return fmt.Sprintf("group coordinator of %q", k.key)
}

// retryErr marks an attempt's failure as worth another attempt for the
// client's retry loop (cluster.Retry), whatever the cause says.
type retryErr struct{ error }

func (e retryErr) Unwrap() error   { return e.error }
func (e retryErr) Retriable() bool { return true }

// cappedRequest sends a request at most at version max: AddPartitionsToTxn
// v4+ is the brokers' batched form, and under transactions v1 the requests
// stay below the KIP-890 versions, as the Java client's do.
type cappedRequest struct {
	kmsg.Request
	max int16
}

func (r cappedRequest) MaxVersion() int16 { return min(r.max, r.Request.MaxVersion()) }

// coordinator returns the node of k's coordinator, asking any broker once
// when it is not known.
func (s *txnState) coordinator(ctx context.Context, k coordKey) (int32, error) {
	s.mu.Lock()
	node, ok := s.coords[k]
	s.mu.Unlock()
	if ok {
		return node, nil
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = k.key
	req.CoordinatorKeys = []string{k.key}
	req.CoordinatorType = k.typ
	resp, err := s.p.cl.RequestAnyOnce(ctx, req)
	if err != nil {
		return -1, err
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	code, node := r.ErrorCode, r.NodeID
	if len(r.Coordinators) > 0 {
		code, node = r.Coordinators[0].ErrorCode, r.Coordinators[0].NodeID
	}
	if code != 0 {
		return -1, &coordError{op: txn.OpFindCoordinator, code: code, err: fmt.Errorf("finding the %s: %w", k, kafkaerr.ForCode(code))}
	}
	s.mu.Lock()
	s.coords[k] = node
	s.mu.Unlock()
	return node, nil
}

func (s *txnState) forget(k coordKey) {
	s.mu.Lock()
	delete(s.coords, k)
	s.mu.Unlock()
}

// coordError is a coordinator's answer with an error code.
type coordError struct {
	op   txn.Op
	code int16
	err  error
}

func (e *coordError) Error() string { return e.err.Error() }
func (e *coordError) Unwrap() error { return e.err }

// send sends req to k's coordinator once and returns the response and the
// versions the connection negotiated. A failure to reach the coordinator
// forgets it, so the next attempt looks it up again.
func (s *txnState) send(ctx context.Context, k coordKey, req kmsg.Request) (kmsg.Response, *conn.Versions, error) {
	node, err := s.coordinator(ctx, k)
	if err != nil {
		return nil, nil, err
	}
	cn, err := s.p.cl.Conn(ctx, node, cluster.ClassOther)
	if err != nil {
		s.forget(k)
		return nil, nil, err
	}
	vers := cn.Versions()
	if k.typ == 1 {
		s.learn(vers)
	}
	resp, err := cn.Request(ctx, req)
	if err != nil {
		s.forget(k)
		return nil, vers, err
	}
	return resp, vers, nil
}

// learn records what the transaction coordinator supports: KIP-890
// transactions (transaction.version 2 finalized, and the request versions
// that carry them within the client's caps) and epoch bumps (KIP-360,
// InitProducerId v3+).
func (s *txnState) learn(v *conn.Versions) {
	endTxn, _ := v.Max(int16(kmsg.EndTxn), 5)
	produce, _ := v.Max(int16(kmsg.Produce), 12)
	offsets, _ := v.Max(int16(kmsg.TxnOffsetCommit), 5)
	init, _ := v.Max(int16(kmsg.InitProducerID), 3)
	v2 := v.Feature("transaction.version") >= 2 && endTxn >= 5 && produce >= 12 && offsets >= 5
	s.mu.Lock()
	s.v2 = v2
	s.canBump = init >= 3
	s.mu.Unlock()
}

// action classifies an attempt's error: a coordinator's code through the
// core's table, a failure to reach the coordinator as Relocate (the Java
// client looks it up again after a disconnection), anything else as fatal.
func action(op txn.Op, err error) txn.Action {
	var ce *coordError
	switch {
	case err == nil:
		return txn.Done
	case errors.As(err, &ce):
		return txn.Classify(ce.op, ce.code)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return txn.Retry // the caller's context: the loop stops on it
	case errs.IsRetriable(err):
		return txn.Relocate
	}
	return txn.Fatal
}

// run calls attempt until it is done, fails for good (abortable, fatal,
// fenced), the caller's ctx ends or the client's retry budget
// (RetryTimeout) runs out, backing off between attempts (KIP-580). An
// attempt that asks to relocate has its coordinator forgotten. It
// returns the action of the last attempt and its error; for Retry and
// Relocate the outcome is unknown (ctx or the budget ended the retries).
func (s *txnState) run(ctx context.Context, op txn.Op, k coordKey, attempt func(ctx context.Context) error) (txn.Action, error) {
	last := txn.Done
	err := s.p.cl.Retry(ctx, func(ctx context.Context) error {
		err := attempt(ctx)
		last = action(op, err)
		switch last {
		case txn.Done:
			return nil
		case txn.Relocate:
			s.forget(k)
			fallthrough
		case txn.Retry:
			s.p.c.log.Debug("transactional request failed; retrying", "request", op.String(), "transactional_id", s.id, "err", err)
			return retryErr{err}
		}
		return txn.Wrap(last, err)
	})
	if err != nil && last == txn.Done {
		last = txn.Retry
	}
	return last, err
}

// initProducerID asks the transaction coordinator for the producer's id
// and epoch: a first one (cur nil), which fences every earlier producer
// with the same transactional id and aborts its open transaction, or a
// bump of cur (KIP-360).
func (s *txnState) initProducerID(ctx context.Context, cur *producer.Identity) (producer.Identity, txn.Action, error) {
	k := coordKey{1, s.id}
	var id producer.Identity
	a, err := s.run(ctx, txn.OpInitProducerID, k, func(ctx context.Context) error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &s.id
		req.TransactionTimeoutMillis = int32(s.timeout.Milliseconds())
		req.ProducerID, req.ProducerEpoch = -1, -1
		if cur != nil {
			req.ProducerID, req.ProducerEpoch = cur.ID, cur.Epoch
		}
		resp, _, err := s.send(ctx, k, req)
		if err != nil {
			return err
		}
		r := resp.(*kmsg.InitProducerIDResponse)
		if r.ErrorCode != 0 {
			return &coordError{txn.OpInitProducerID, r.ErrorCode, fmt.Errorf("InitProducerId for transactional id %q: %w", s.id, kafkaerr.ForCode(r.ErrorCode))}
		}
		id = producer.Identity{ID: r.ProducerID, Epoch: r.ProducerEpoch}
		return nil
	})
	return id, a, err
}

// addPartitions adds tps to transaction seq (v1, AddPartitionsToTxn). The
// retries stop once the transaction takes no more batches (an abort
// began): a late add would open a transaction at the coordinator that the
// producer knows nothing of.
func (s *txnState) addPartitions(ctx context.Context, seq uint64, tps []txn.TP) (txn.Action, error) {
	k := coordKey{1, s.id}
	return s.run(ctx, txn.OpAddPartitions, k, func(ctx context.Context) error {
		if !s.adding(seq) {
			return txn.Wrap(txn.Abortable, errTxnMovedOn)
		}
		id := s.p.currentIdentity()
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID = s.id
		req.ProducerID, req.ProducerEpoch = id.ID, id.Epoch
		idx := map[string]int{}
		for _, tp := range tps {
			t := topicEntry(&req.Topics, idx, tp.Topic, func(name string) kmsg.AddPartitionsToTxnRequestTopic {
				t := kmsg.NewAddPartitionsToTxnRequestTopic()
				t.Topic = name
				return t
			})
			t.Partitions = append(t.Partitions, tp.Partition)
		}
		resp, _, err := s.send(ctx, k, cappedRequest{req, 3})
		if err != nil {
			return err
		}
		return perPartition(txn.OpAddPartitions, "AddPartitionsToTxn", resp.(*kmsg.AddPartitionsToTxnResponse).Topics,
			func(t kmsg.AddPartitionsToTxnResponseTopic) (string, []kmsg.AddPartitionsToTxnResponseTopicPartition) {
				return t.Topic, t.Partitions
			},
			func(p kmsg.AddPartitionsToTxnResponseTopicPartition) (int32, int16) { return p.Partition, p.ErrorCode })
	})
}

// adding reports whether partitions may still be added to transaction
// seq.
func (s *txnState) adding(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Seq() == seq && s.m.Sending()
}

// errTxnMovedOn stops the retries of a request for a transaction that
// ended meanwhile.
var errTxnMovedOn = errors.New("the transaction ended meanwhile")

// perPartition turns a response answered per partition into the error of
// its gravest partition (nil if all succeeded), naming the partition.
func perPartition[T, P any](op txn.Op, name string, topics []T, parts func(T) (string, []P), code func(P) (int32, int16)) error {
	var worst *coordError
	for _, t := range topics {
		topic, ps := parts(t)
		for _, p := range ps {
			partition, c := code(p)
			if c == 0 {
				continue
			}
			if worst == nil || txn.Classify(op, c) > txn.Classify(op, worst.code) {
				worst = &coordError{op, c, fmt.Errorf("%s %s[%d]: %w", name, topic, partition, kafkaerr.ForCode(c))}
			}
		}
	}
	if worst == nil {
		return nil
	}
	return worst
}

// endTxn ends the transaction at the coordinator, committing or aborting.
// Under KIP-890 (EndTxn v5+) the answer carries the producer's next epoch,
// returned as next (nil otherwise, or if it is the current one).
func (s *txnState) endTxn(ctx context.Context, commit bool) (next *producer.Identity, a txn.Action, err error) {
	k := coordKey{1, s.id}
	v2 := s.isV2()
	a, err = s.run(ctx, txn.OpEndTxn, k, func(ctx context.Context) error {
		id := s.p.currentIdentity()
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID = s.id
		req.ProducerID, req.ProducerEpoch = id.ID, id.Epoch
		req.Commit = commit
		var r kmsg.Request = req
		if !v2 {
			r = cappedRequest{req, 4}
		}
		resp, _, err := s.send(ctx, k, r)
		if err != nil {
			return err
		}
		er := resp.(*kmsg.EndTxnResponse)
		if er.ErrorCode != 0 {
			verb := "aborting"
			if commit {
				verb = "committing"
			}
			err := fmt.Errorf("EndTxn %s the transaction of %q: %w", verb, s.id, kafkaerr.ForCode(er.ErrorCode))
			return &coordError{txn.OpEndTxn, er.ErrorCode, s.timedOut(err)}
		}
		if er.Version >= 5 && er.ProducerID >= 0 && er.ProducerEpoch >= 0 && (er.ProducerID != id.ID || er.ProducerEpoch != id.Epoch) {
			next = &producer.Identity{ID: er.ProducerID, Epoch: er.ProducerEpoch}
		}
		return nil
	})
	return next, a, err
}

// timedOut adds to err, an error of the coordinator, that the transaction
// has been open longer than TransactionTimeout, if it has: the coordinator
// aborts such a transaction and bumps the epoch, so it is the likely
// cause. The result then matches ErrTransactionTimedOut.
func (s *txnState) timedOut(err error) error {
	s.mu.Lock()
	start := s.start
	s.mu.Unlock()
	if start.IsZero() {
		return err
	}
	if open := time.Since(start); open > s.timeout {
		return fmt.Errorf("%w (%w: the transaction was open for %v, beyond TransactionTimeout %v: the coordinator has likely aborted it)", err, ErrTransactionTimedOut, open.Round(time.Millisecond), s.timeout)
	}
	return err
}

// addOffsets adds group to the transaction (v1, AddOffsetsToTxn).
func (s *txnState) addOffsets(ctx context.Context, group string) (txn.Action, error) {
	k := coordKey{1, s.id}
	return s.run(ctx, txn.OpAddOffsets, k, func(ctx context.Context) error {
		id := s.p.currentIdentity()
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID = s.id
		req.ProducerID, req.ProducerEpoch = id.ID, id.Epoch
		req.Group = group
		resp, _, err := s.send(ctx, k, req)
		if err != nil {
			return err
		}
		if c := resp.(*kmsg.AddOffsetsToTxnResponse).ErrorCode; c != 0 {
			return &coordError{txn.OpAddOffsets, c, fmt.Errorf("AddOffsetsToTxn of group %q: %w", group, kafkaerr.ForCode(c))}
		}
		return nil
	})
}

// txnOffsetCommit commits offsets for group in the transaction, at the
// group's coordinator. Partitions that succeed leave the request; the
// others are sent again.
func (s *txnState) txnOffsetCommit(ctx context.Context, offsets map[TopicPartition]OffsetAndMetadata, g GroupMetadata) (txn.Action, error) {
	k := coordKey{0, g.GroupID}
	pending := make(map[TopicPartition]OffsetAndMetadata, len(offsets))
	for tp, om := range offsets {
		pending[tp] = om
	}
	maxV := int16(4)
	if s.isV2() {
		maxV = 5 // v6 names topics by id (KIP-1319)
	}
	return s.run(ctx, txn.OpTxnOffsetCommit, k, func(ctx context.Context) error {
		resp, _, err := s.send(ctx, k, cappedRequest{s.txnOffsetCommitRequest(pending, g), maxV})
		if err != nil {
			return err
		}
		var worst *coordError
		for _, t := range resp.(*kmsg.TxnOffsetCommitResponse).Topics {
			for _, p := range t.Partitions {
				tp := TopicPartition{t.Topic, p.Partition}
				if p.ErrorCode == 0 {
					if om, ok := pending[tp]; ok && len(s.p.commitHks) > 0 {
						s.keptOffset(g.GroupID, tp, om)
					}
					delete(pending, tp)
					continue
				}
				if worst == nil || txn.Classify(txn.OpTxnOffsetCommit, p.ErrorCode) > txn.Classify(txn.OpTxnOffsetCommit, worst.code) {
					worst = &coordError{txn.OpTxnOffsetCommit, p.ErrorCode, fmt.Errorf("TxnOffsetCommit of group %q, %s: %w", g.GroupID, tp, kafkaerr.ForCode(p.ErrorCode))}
				}
			}
		}
		if worst != nil {
			return worst
		}
		if len(pending) > 0 {
			return retryErr{fmt.Errorf("%w: TxnOffsetCommit answer lacks %d partitions", ErrMalformedResponse, len(pending))}
		}
		return nil
	})
}

func (s *txnState) txnOffsetCommitRequest(offsets map[TopicPartition]OffsetAndMetadata, g GroupMetadata) *kmsg.TxnOffsetCommitRequest {
	id := s.p.currentIdentity()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID = s.id
	req.Group = g.GroupID
	req.ProducerID, req.ProducerEpoch = id.ID, id.Epoch
	req.Generation = g.GenerationID
	req.MemberID = g.MemberID
	if g.GroupInstanceID != "" {
		req.InstanceID = &g.GroupInstanceID
	}
	idx := map[string]int{}
	for _, tp := range sortedTPs(offsets) {
		om := offsets[tp]
		t := topicEntry(&req.Topics, idx, tp.Topic, func(name string) kmsg.TxnOffsetCommitRequestTopic {
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic = name
			return t
		})
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition = tp.Partition
		p.Offset = om.Offset
		p.LeaderEpoch = om.LeaderEpoch
		if om.Metadata != "" {
			md := om.Metadata
			p.Metadata = &md
		}
		t.Partitions = append(t.Partitions, p)
	}
	return req
}

func sortedTPs[V any](m map[TopicPartition]V) []TopicPartition {
	out := make([]TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	sortTPs(out)
	return out
}
