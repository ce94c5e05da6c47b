package riffbeam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/ranges"
)

func init() {
	beam.RegisterType(reflect.TypeOf(partition{}))
	register.DoFn3x1[context.Context, []byte, func(partition), error](&planFn{})
	register.DoFn4x2[context.Context, *tracker, string, func(partition), sdf.ProcessContinuation, error](&discoverFn{})
	register.Emitter1[partition]()
	register.DoFn5x2[context.Context, *wmEstimator, *tracker, partition, func(beam.EventTime, Record), sdf.ProcessContinuation, error](&readFn{})
	register.DoFn6x2[context.Context, *wmEstimator, beam.BundleFinalization, *tracker, partition, func(beam.EventTime, Record), sdf.ProcessContinuation, error](&commitReadFn{})
	register.Emitter2[beam.EventTime, Record]()
}

// partition is one partition to read from Start, up to End (unboundedEnd:
// no end); its restriction is the offset range [Start, End).
type partition struct {
	Topic     string
	Partition int32
	Start     int64
	End       int64
}

// Defaults.
const (
	defaultPoll          = 500 * time.Millisecond
	defaultDiscover      = 10 * time.Second
	defaultIdleLag       = 2 * time.Second
	defaultCommitTimeout = 30 * time.Second
	finalizeExpiry       = 10 * time.Minute
)

// Read reads the topics of the cluster at brokers into a PCollection of
// [Record], each with its timestamp as event time. By default it is a
// bounded read of every partition from its log start (StartEarliest) to
// its high watermark as of the pipeline's start; see the options for
// groups, commits, start specs, unbounded reads and splitting. Invalid
// options panic, as beam.ParDo does; TryRead returns them.
func Read(s beam.Scope, brokers []string, topics []string, opts ...ReadOption) beam.PCollection {
	col, err := TryRead(s, brokers, topics, opts...)
	if err != nil {
		panic(err)
	}
	return col
}

// TryRead is Read returning an error (matching ErrInvalidOption for
// invalid options) instead of panicking.
func TryRead(s beam.Scope, brokers []string, topics []string, opts ...ReadOption) (beam.PCollection, error) {
	spec := readSpec{
		Brokers: slices.Clone(brokers), Topics: slices.Clone(topics), StartKind: 1,
		PollNanos: int64(defaultPoll), DiscoverNanos: int64(defaultDiscover),
		IdleLagNanos: int64(defaultIdleLag), // CommitNanos 0: defaultCommitTimeout (readSpec.commitTimeout)
	}
	for _, o := range opts {
		o(&spec)
	}
	if err := spec.validate(); err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("riffbeam.Read")
	var parts beam.PCollection
	var err error
	if spec.Unbounded {
		parts, err = tryParDo1(s, &discoverFn{Spec: spec}, beam.CreateList(s, spec.Topics))
	} else {
		parts, err = tryParDo1(s, &planFn{Spec: spec}, beam.Impulse(s))
	}
	if err != nil {
		return beam.PCollection{}, err
	}
	if spec.Commit {
		return tryParDo1(s, &commitReadFn{readFn{Spec: spec}}, parts)
	}
	return tryParDo1(s, &readFn{Spec: spec}, parts)
}

// newPlanner returns a ranges.Planner of topics with the read's group,
// start spec and isolation.
func newPlanner(cl *riffle.Client, spec *readSpec, topics []string, extra ...ranges.Option) (*ranges.Planner, error) {
	opts := append([]ranges.Option{ranges.StartAt(spec.start()), ranges.NewPartitionsStartAt(spec.newStart())}, extra...)
	if spec.ReadCommitted {
		opts = append(opts, ranges.ReadCommitted())
	}
	return ranges.NewPlanner(cl, spec.Group, topics, opts...)
}

// planRound runs one planning round: on the first, from the group's
// committed offsets, else the start spec, up to the high watermark; on
// later ones (the planner refreshes metadata) partitions added since start
// where the read's new-partition spec says (earliest by default). With CommitOffsets it then commits the
// starting offsets it has not committed yet, so a moving start spec is
// pinned where the read began.
func planRound(ctx context.Context, planner *ranges.Planner, spec *readSpec, topics []string) ([]ranges.Range, error) {
	rs, err := planner.Next(ctx)
	if err != nil {
		return nil, fmt.Errorf("riffbeam: planning %v: %w", topics, err)
	}
	if spec.Commit {
		if err := planner.Checkpoint().Commit(ctx); err != nil {
			return nil, fmt.Errorf("riffbeam: committing the starting offsets of group %q: %w", spec.Group, err)
		}
	}
	return rs, nil
}

// planFn plans a bounded read once, when the pipeline runs.
type planFn struct {
	Spec readSpec
	cl   *riffle.Client
}

// Setup opens the client.
func (fn *planFn) Setup() error {
	cl, err := newClient(fn.Spec.Brokers, fn.Spec.ClientOptions)
	fn.cl = cl
	return err
}

// Teardown closes the client.
func (fn *planFn) Teardown() {
	if fn.cl != nil {
		fn.cl.Close()
	}
}

// ProcessElement plans the topics once, up to their high watermarks as
// of now, and emits one partition per range: the partitions with
// something to read.
func (fn *planFn) ProcessElement(ctx context.Context, _ []byte, emit func(partition)) error {
	planner, err := newPlanner(fn.cl, &fn.Spec, fn.Spec.Topics)
	if err != nil {
		return err
	}
	rs, err := planRound(ctx, planner, &fn.Spec, fn.Spec.Topics)
	if err != nil {
		return err
	}
	for _, rg := range rs {
		emit(partition{Topic: rg.Topic, Partition: rg.Partition, Start: rg.Low, End: rg.High})
	}
	return nil
}

// discoverFn emits the partitions of an unbounded read's topic as they
// appear: a splittable DoFn whose restriction is the range of partition
// numbers, unbounded, resumed every discovery interval. Partitions that
// exist when it starts begin at the group's committed offsets or the
// start spec; later ones where the new-partition spec says (earliest by
// default, see NewPartitionsStartLatest).
type discoverFn struct {
	Spec     readSpec
	cl       *riffle.Client
	planners map[string]*ranges.Planner // per topic, kept across resumptions
}

// Setup opens the client.
func (fn *discoverFn) Setup() error {
	cl, err := newClient(fn.Spec.Brokers, fn.Spec.ClientOptions)
	fn.cl = cl
	return err
}

// Teardown closes the client.
func (fn *discoverFn) Teardown() {
	if fn.cl != nil {
		fn.cl.Close()
	}
}

// CreateInitialRestriction is every partition number.
func (fn *discoverFn) CreateInitialRestriction(_ string) offsetrange.Restriction {
	return offsetrange.Restriction{Start: 0, End: unboundedEnd}
}

// SplitRestriction does not split: discovery is one cheap loop per topic.
func (fn *discoverFn) SplitRestriction(_ string, rest offsetrange.Restriction) []offsetrange.Restriction {
	return []offsetrange.Restriction{rest}
}

// RestrictionSize is nominal.
func (fn *discoverFn) RestrictionSize(_ string, _ offsetrange.Restriction) float64 { return 1 }

// CreateTracker returns a growable tracker.
func (fn *discoverFn) CreateTracker(rest offsetrange.Restriction) *tracker { return newTracker(rest) }

// TruncateRestriction stops discovery when the pipeline drains.
func (fn *discoverFn) TruncateRestriction(rt *tracker, _ string) offsetrange.Restriction {
	start := rt.rest().Start
	return offsetrange.Restriction{Start: start, End: start}
}

// ProcessElement emits the partitions not emitted before, then resumes
// after the discovery interval (or stops, with Until).
func (fn *discoverFn) ProcessElement(ctx context.Context, rt *tracker, topic string, emit func(partition)) (sdf.ProcessContinuation, error) {
	rest := rt.rest()
	planner, ok := fn.planners[topic]
	if !ok {
		var err error
		// Untracked: its ranges are never read here (reads mark theirs
		// done on the process's shared checkpoint), and it runs for the
		// pipeline's life.
		if planner, err = newPlanner(fn.cl, &fn.Spec, []string{topic}, ranges.Untracked()); err != nil {
			return sdf.StopProcessing(), err
		}
		if fn.planners == nil {
			fn.planners = map[string]*ranges.Planner{}
		}
		fn.planners[topic] = planner
		if rest.Start > 0 {
			// Resumed on a new instance: a first round to start from,
			// and the round below refreshes metadata.
			if _, err := planRound(ctx, planner, &fn.Spec, []string{topic}); err != nil {
				return sdf.StopProcessing(), err
			}
		}
	}
	if _, err := planRound(ctx, planner, &fn.Spec, []string{topic}); err != nil {
		return sdf.StopProcessing(), err
	}
	var found []partition
	var fresh []riffle.TopicPartition // not emitted yet, and new since the pipeline started
	for tp, o := range planner.Checkpoint().Offsets() {
		if int64(tp.Partition) < rest.Start {
			continue
		}
		found = append(found, partition{Topic: topic, Partition: tp.Partition, Start: o, End: unboundedEnd})
		if rest.Start > 0 {
			fresh = append(fresh, tp)
		}
	}
	if len(fresh) > 0 && !ok {
		// This instance's first round started partitions added after
		// the pipeline started at the group's offsets: start them where
		// the new-partition spec says, as a running discovery does (a
		// time with no record at or after it: at the end).
		starts, err := fn.newStarts(ctx, topic)
		if err != nil {
			return sdf.StopProcessing(), err
		}
		for i := range found {
			if o, ok := starts[found[i].Partition]; ok {
				found[i].Start = o
			}
		}
	}
	slices.SortFunc(found, func(a, b partition) int { return int(a.Partition - b.Partition) })
	for _, p := range found {
		if !rt.TryClaim(int64(p.Partition)) {
			return sdf.StopProcessing(), nil
		}
		emit(p)
		rt.est.observe(int64(p.Partition) + 1)
	}
	if until := fn.Spec.UntilMillis; until > 0 {
		done := time.Now().UnixMilli() >= until
		if !done {
			past, err := allPast(ctx, fn.cl, topic, until, rt.rest().Start+int64(len(found)))
			if err != nil {
				return sdf.StopProcessing(), err
			}
			done = past
		}
		if done {
			rt.truncate()
			return sdf.StopProcessing(), nil
		}
	}
	return sdf.ResumeProcessingIn(fn.Spec.discover()), nil
}

// allPast reports whether every partition of topic has a record with a
// timestamp at or after ms (Until's end), and there are no more than the
// emitted partitions (a partition not emitted yet is read first).
func allPast(ctx context.Context, cl *riffle.Client, topic string, ms int64, emitted int64) (bool, error) {
	los, err := cl.Admin().ListOffsets(ctx, ms, topic)
	if err != nil {
		return false, fmt.Errorf("riffbeam: listing offsets of %s at %d: %w", topic, ms, err)
	}
	for _, lo := range los {
		if lo.Err != nil {
			return false, fmt.Errorf("riffbeam: listing %s[%d]: %w", topic, lo.Partition, lo.Err)
		}
		if lo.Offset < 0 {
			return false, nil
		}
	}
	return len(los) > 0 && int64(len(los)) <= emitted, nil
}

// errStop ends a read from inside its record callback.
var errStop = errors.New("riffbeam: stop reading")

// readFn reads one partition's offset range: a splittable DoFn whose
// restriction is [Start, End) of offsets (End unboundedEnd: unbounded).
// Each instance keeps one client and one ranges.Reader for all the
// restrictions it reads.
type readFn struct {
	Spec readSpec
	cl   *riffle.Client
	rd   *ranges.Reader
	cp   *sharedCheckpoint
}

// Setup opens the client, the Reader and, with CommitOffsets, the
// process's shared checkpoint of the group.
func (fn *readFn) Setup() error {
	cl, err := newClient(fn.Spec.Brokers, fn.Spec.ClientOptions)
	if err != nil {
		return err
	}
	fn.cl = cl
	var opts []ranges.Option
	if fn.Spec.ReadCommitted {
		opts = append(opts, ranges.ReadCommitted())
	}
	fn.rd = ranges.NewReader(cl, opts...)
	if fn.Spec.Commit {
		cp, err := acquireCheckpoint(&fn.Spec)
		if err != nil {
			return err
		}
		fn.cp = cp
	}
	return nil
}

// Teardown closes what Setup opened.
func (fn *readFn) Teardown() {
	if fn.cp != nil {
		fn.cp.release(fn.Spec.commitTimeout())
		fn.cp = nil
	}
	if fn.rd != nil {
		fn.rd.Close()
	}
	if fn.cl != nil {
		fn.cl.Close()
	}
}

// CreateInitialRestriction is the partition's planned range.
func (fn *readFn) CreateInitialRestriction(p partition) offsetrange.Restriction {
	return offsetrange.Restriction{Start: p.Start, End: p.End}
}

// SplitRestriction splits a bounded range into SplitSize pieces.
func (fn *readFn) SplitRestriction(_ partition, rest offsetrange.Restriction) []offsetrange.Restriction {
	if rest.End == unboundedEnd || fn.Spec.SplitSize <= 0 || rest.End-rest.Start <= fn.Spec.SplitSize {
		return []offsetrange.Restriction{rest}
	}
	return rest.SizedSplits(fn.Spec.SplitSize)
}

// RestrictionSize is the number of offsets of a bounded range; an
// unbounded one counts as the planned backlog is unknown here (1).
func (fn *readFn) RestrictionSize(_ partition, rest offsetrange.Restriction) float64 {
	if rest.End == unboundedEnd {
		return 1
	}
	return rest.Size()
}

// CreateTracker returns the restriction's tracker.
func (fn *readFn) CreateTracker(rest offsetrange.Restriction) *tracker { return newTracker(rest) }

// TruncateRestriction (drain): an unbounded range stops where it is, a
// bounded one is read to its end.
func (fn *readFn) TruncateRestriction(rt *tracker, _ partition) offsetrange.Restriction {
	rest := rt.rest()
	if rest.End == unboundedEnd {
		return offsetrange.Restriction{Start: rest.Start, End: rest.Start}
	}
	return rest
}

// InitialWatermarkEstimatorState starts the watermark at the element's
// event time.
func (fn *readFn) InitialWatermarkEstimatorState(et beam.EventTime, _ offsetrange.Restriction, _ partition) int64 {
	return et.Milliseconds()
}

// CreateWatermarkEstimator restores the estimator from its state.
func (fn *readFn) CreateWatermarkEstimator(ms int64) *wmEstimator {
	we := &wmEstimator{}
	we.ms.Store(ms)
	return we
}

// WatermarkEstimatorState is the watermark in Unix milliseconds.
func (fn *readFn) WatermarkEstimatorState(we *wmEstimator) int64 { return we.ms.Load() }

// ProcessElement reads the restriction; see process.
func (fn *readFn) ProcessElement(ctx context.Context, we *wmEstimator, rt *tracker, p partition, emit func(beam.EventTime, Record)) (sdf.ProcessContinuation, error) {
	return fn.process(ctx, we, nil, rt, p, emit)
}

// commitReadFn is readFn with CommitOffsets: its ProcessElement takes the
// bundle finalization it registers the commits with (a DoFn without it
// does not ask the runner to finalize its bundles).
type commitReadFn struct{ readFn }

// ProcessElement reads the restriction and commits it when the bundle is
// finalized; see process.
func (fn *commitReadFn) ProcessElement(ctx context.Context, we *wmEstimator, bf beam.BundleFinalization, rt *tracker, p partition, emit func(beam.EventTime, Record)) (sdf.ProcessContinuation, error) {
	return fn.process(ctx, we, bf, rt, p, emit)
}

// process reads the restriction: every record is claimed before
// it is emitted, so a split (the runner's, from another goroutine) ends
// this read at the split point and the residual reads on from there. A
// bounded range is read to its end; an unbounded one up to the high
// watermark, then resumed after the poll interval.
func (fn *readFn) process(ctx context.Context, we *wmEstimator, bf beam.BundleFinalization, rt *tracker, p partition, emit func(beam.EventTime, Record)) (sdf.ProcessContinuation, error) {
	rest := rt.rest()
	unbounded := rest.End == unboundedEnd
	next := rest.Start
	until := fn.Spec.UntilMillis
	var claimFailed, reachedUntil bool
	handle := func(r *riffle.Record) error {
		if until > 0 && r.Timestamp.UnixMilli() >= until {
			reachedUntil = true
			return errStop
		}
		if !rt.TryClaim(r.Offset) {
			claimFailed = true
			return errStop
		}
		emit(mtime.FromTime(r.Timestamp), fromRiffle(r))
		next = r.Offset + 1
		return nil
	}
	for {
		err := fn.rd.Read(ctx, ranges.Range{Topic: p.Topic, Partition: p.Partition, Low: next, High: rest.End}, handle)
		switch {
		case err == nil: // a bounded range read to its end
			fn.finalize(bf, p, rest.Start, rt.finish())
			return sdf.StopProcessing(), nil
		case errors.Is(err, errStop) && claimFailed: // split: the primary ends before this record
			fn.finalize(bf, p, rest.Start, rt.rest().End)
			return sdf.StopProcessing(), nil
		case errors.Is(err, errStop) && reachedUntil:
			fn.finalize(bf, p, rest.Start, rt.truncate())
			return sdf.StopProcessing(), nil
		case errors.Is(err, ranges.ErrBelowLogStart):
			ls, lerr := logStart(ctx, fn.cl, p)
			if lerr != nil {
				return sdf.StopProcessing(), lerr
			}
			if ls <= next {
				return sdf.StopProcessing(), fmt.Errorf("riffbeam: reading %s[%d] at %d: %w", p.Topic, p.Partition, next, err)
			}
			slog.Warn("riffbeam: records were deleted before they were read", "topic", p.Topic, "partition", p.Partition, "from", next, "to", ls)
			next = min(ls, rest.End)
		case errors.Is(err, ranges.ErrBeyondHighWatermark) && unbounded:
			rt.est.observe(next)
			if until > 0 && time.Now().UnixMilli() >= until {
				fn.finalize(bf, p, rest.Start, rt.truncate())
				return sdf.StopProcessing(), nil
			}
			we.advance(time.Now().Add(-time.Duration(fn.Spec.IdleLagNanos)).UnixMilli())
			fn.finalize(bf, p, rest.Start, next) // the checkpoint's primary ends at next
			return sdf.ResumeProcessingIn(fn.Spec.poll()), nil
		default:
			return sdf.StopProcessing(), fmt.Errorf("riffbeam: reading %s[%d] at %d: %w", p.Topic, p.Partition, next, err)
		}
	}
}

// newStarts lists where the new-partition spec starts topic's partitions.
// Only a time can find no offset (no record at or after it): those
// partitions, and only those, are listed again at their end. A partition
// whose listing failed fails the discovery (the runner retries it) rather
// than start anywhere else.
func (fn *discoverFn) newStarts(ctx context.Context, topic string) (map[int32]int64, error) {
	starts := map[int32]int64{}
	var none bool // a partition has no offset at the time
	at := fn.Spec.newStartListing()
	for {
		los, err := fn.cl.Admin().ListOffsets(ctx, at, topic)
		if err != nil {
			return nil, fmt.Errorf("riffbeam: listing partitions of %s: %w", topic, err)
		}
		for _, lo := range los {
			if _, ok := starts[lo.Partition]; ok {
				continue
			}
			switch {
			case lo.Err != nil:
				return nil, fmt.Errorf("riffbeam: listing %s[%d]: %w", topic, lo.Partition, lo.Err)
			case lo.Offset >= 0:
				starts[lo.Partition] = lo.Offset
			default:
				none = true
			}
		}
		if !none || at == riffle.OffsetLatest {
			return starts, nil
		}
		at = riffle.OffsetLatest
	}
}

// finalize registers, with CommitOffsets, the commit of [lo, hi) of p for
// when the runner finalizes the bundle.
func (fn *readFn) finalize(bf beam.BundleFinalization, p partition, lo, hi int64) {
	if bf == nil || fn.cp == nil || hi <= lo {
		return
	}
	rg := ranges.Range{Topic: p.Topic, Partition: p.Partition, Low: lo, High: hi}
	cp, timeout := fn.cp.cp, fn.Spec.commitTimeout()
	bf.RegisterCallback(finalizeExpiry, func() error {
		if err := cp.MarkDone(rg); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := cp.Commit(ctx); err != nil {
			// rg stays done: the process's next commit retries it.
			return fmt.Errorf("riffbeam: committing %s for group %q (retried by this worker's next commit): %w", rg, fn.Spec.Group, err)
		}
		return nil
	})
}

// logStart is p's log start offset.
func logStart(ctx context.Context, cl *riffle.Client, p partition) (int64, error) {
	los, err := cl.Admin().ListOffsets(ctx, riffle.OffsetEarliest, p.Topic)
	if err != nil {
		return 0, err
	}
	for _, lo := range los {
		if lo.Partition == p.Partition {
			return lo.Offset, lo.Err
		}
	}
	return 0, fmt.Errorf("riffbeam: %s[%d]: %w", p.Topic, p.Partition, riffle.ErrUnknownTopicOrPartition)
}

// tryParDo1 is beam.TryParDo for a DoFn with one output.
func tryParDo1(s beam.Scope, dofn any, col beam.PCollection) (beam.PCollection, error) {
	out, err := beam.TryParDo(s, dofn, col)
	if err != nil {
		return beam.PCollection{}, err
	}
	if len(out) != 1 {
		return beam.PCollection{}, fmt.Errorf("riffbeam: %T has %d outputs, want 1", dofn, len(out))
	}
	return out[0], nil
}
