package process

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle"
)

// ErrDeliveryLimit is reported (OnError, as a *RecordError) for a record
// that arrives from a share group with a delivery count at the limit
// (ShareDeliveryLimit): this is its last delivery; if it fails again, the
// group archives it.
var ErrDeliveryLimit = errors.New("riffle/process: record at the share group's delivery count limit")

// ShareDeliveryLimit is the share group's delivery count limit
// (group.share.delivery.count.limit, or the group's
// share.delivery.count.limit; Kafka's default is 5), for reporting records
// on their last delivery (ErrDeliveryLimit). Zero means 5.
func ShareDeliveryLimit(n int) Option { return func(c *config) { c.shareLimit = n } }

// ShareProcessor runs a Handler over a share group (KIP-932): the broker
// hands records to the group's members one at a time under acquisition
// locks, so there is no ordering (records of a partition run
// concurrently, across members) and no commit: each record is
// acknowledged on its own when it ends.
//
//   - handler success: accepted;
//   - failure (after the RetryPolicy's attempts, which run while the
//     record's lock is renewed, where the broker supports KIP-1222): the
//     record goes to the DeadLetter function and is then accepted; without
//     one, or when it fails, the record is rejected (archived), resp.
//     released to be tried again;
//   - cancellation (Close's deadline): released, not a failure; the group
//     delivers it again.
type ShareProcessor struct {
	sc    *riffle.ShareConsumer
	ready chan struct{} // closed once sc is set: handlers may start before
	cfg   config
	h     Handler

	running                                    atomic.Int64
	processed, retries, deadLettered, rejected atomic.Int64
	released, failed, atLimit                  atomic.Int64
}

// NewShare returns a processor of the share group named in
// ConsumerOptions (riffle.ShareGroup with riffle.SubscribeTopics). It takes
// the options of New that apply: Concurrency (the handler goroutines),
// Retry, DeadLetter, OnError, WithHooks, ShareDeliveryLimit and
// ConsumerOptions; Ordering other than Unordered is refused with
// ErrInvalidConfig (a share group has no order to keep).
func NewShare(cl *riffle.Client, h Handler, opts ...Option) (*ShareProcessor, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.modeSet && cfg.mode != Unordered {
		return nil, fmt.Errorf("%w: process: a share group is unordered by nature: Ordering(%v) needs a consumer group (New)", riffle.ErrInvalidConfig, cfg.mode)
	}
	cfg.mode = Unordered
	if h == nil {
		return nil, fmt.Errorf("%w: process: nil handler", riffle.ErrInvalidConfig)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.shareLimit < 0 {
		return nil, fmt.Errorf("%w: process: negative share delivery limit", riffle.ErrInvalidConfig)
	}
	if cfg.shareLimit == 0 {
		cfg.shareLimit = 5
	}
	p := &ShareProcessor{cfg: cfg, h: h, ready: make(chan struct{})}
	copts := append([]riffle.ConsumerOption{}, cfg.consumer...)
	copts = append(copts,
		riffle.Runners(cfg.concurrency),
		riffle.ShareMaxRecords(cfg.concurrency),
		riffle.ShareAcknowledgementMode(riffle.ShareAckExplicit),
		riffle.HandleRecord(p.handle))
	sc, err := riffle.NewShareConsumer(cl, copts...)
	if err != nil {
		return nil, err
	}
	p.sc = sc
	close(p.ready)
	return p, nil
}

// Consumer returns the underlying share consumer.
func (p *ShareProcessor) Consumer() *riffle.ShareConsumer { return p.sc }

func (p *ShareProcessor) report(err error) {
	if p.cfg.onError != nil {
		p.cfg.onError(err)
	}
}

func (p *ShareProcessor) ack(r *riffle.Record, t riffle.AcknowledgeType) {
	if err := p.sc.Acknowledge(r, t); err != nil && !errors.Is(err, riffle.ErrNotAcquired) {
		p.report(err)
	}
}

func (p *ShareProcessor) handle(ctx context.Context, r *riffle.Record) error {
	<-p.ready
	p.running.Add(1)
	defer p.running.Add(-1)
	tp := riffle.TopicPartition{Topic: r.Topic, Partition: r.Partition}
	if int(r.DeliveryCount) >= p.cfg.shareLimit {
		p.atLimit.Add(1)
		p.report(&RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Attempts: 0, Err: ErrDeliveryLimit})
	}
	start := time.Now()
	attempts, err := p.attempt(ctx, tp, r)
	if errors.Is(err, errStopped) {
		p.released.Add(1)
		p.ack(r, riffle.AckRelease)
		return nil
	}
	finish := func(herr error) {
		if h := p.cfg.hooks.OnFinish; h != nil {
			h(tp, r.Offset, attempts, time.Since(start), herr)
		}
	}
	if err == nil {
		p.processed.Add(1)
		finish(nil)
		p.ack(r, riffle.AckAccept)
		return nil
	}
	if p.cfg.deadLetter == nil {
		p.rejected.Add(1)
		p.failed.Add(1)
		finish(err)
		p.report(&RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Attempts: attempts, Err: err})
		p.ack(r, riffle.AckReject)
		return nil
	}
	derr := safeCall(func() error { return p.cfg.deadLetter(ctx, r, err, attempts) })
	if h := p.cfg.hooks.OnDeadLetter; h != nil {
		h(tp, r.Offset, derr)
	}
	if derr == nil {
		p.deadLettered.Add(1)
		finish(nil)
		p.ack(r, riffle.AckAccept)
		return nil
	}
	err = fmt.Errorf("dead letter: %w (record failed with: %w)", derr, err)
	p.failed.Add(1)
	finish(err)
	p.report(&RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Attempts: attempts, Err: err})
	p.released.Add(1)
	p.ack(r, riffle.AckRelease) // to be tried again
	return nil
}

func (p *ShareProcessor) attempt(ctx context.Context, tp riffle.TopicPartition, r *riffle.Record) (int, error) {
	rp := p.cfg.retry
	for n := 1; ; n++ {
		err := safeCall(func() error { return p.h(ctx, r) })
		if err == nil {
			return n, nil
		}
		if ctx.Err() != nil {
			return n, errStopped
		}
		if n >= rp.Attempts || (rp.RetryIf != nil && !rp.RetryIf(err)) {
			return n, err
		}
		if h := p.cfg.hooks.OnRetry; h != nil {
			h(tp, r.Offset, n, err)
		}
		p.retries.Add(1)
		t := time.NewTimer(backoff(rp, n))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return n, errStopped
		}
	}
}

// ShareStats describes a ShareProcessor.
type ShareStats struct {
	// Running counts records whose handler (or retry wait) runs.
	Running int64
	// Processed: handler succeeded (accepted). Retries: attempts retried.
	// DeadLettered: failed for good, dead-lettered and accepted.
	// Rejected: failed for good without a dead-letter function. Failed:
	// failed for good (Rejected plus dead-letter failures, which are
	// released). Released: cancelled or dead-letter failures given back.
	// AtLimit: records received at the delivery count limit.
	Processed, Retries, DeadLettered, Rejected, Failed, Released, AtLimit int64
	// Consumer is the share consumer's view: acquired records, locks,
	// acknowledgements sent.
	Consumer riffle.ShareStats
}

// Stats returns a snapshot.
func (p *ShareProcessor) Stats() ShareStats {
	return ShareStats{
		Running: p.running.Load(), Processed: p.processed.Load(), Retries: p.retries.Load(),
		DeadLettered: p.deadLettered.Load(), Rejected: p.rejected.Load(), Failed: p.failed.Load(),
		Released: p.released.Load(), AtLimit: p.atLimit.Load(), Consumer: p.sc.Stats(),
	}
}

// Close stops taking records, lets running ones finish until ctx ends
// (then cancels them: their records are released, not failed), and
// leaves the group (see riffle.ShareConsumer.Close).
func (p *ShareProcessor) Close(ctx context.Context) error {
	return p.sc.Close(ctx)
}
