package riffbeam

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
)

// unboundedEnd is the End of an unbounded restriction.
const unboundedEnd = math.MaxInt64

// tracker is the restriction tracker of the read and discovery DoFns: an
// offsetrange tracker (a growable one for unbounded restrictions), locked
// so that runner-initiated splits may come from another goroutine, with
// an end estimate for unbounded progress that the DoFn feeds from what it
// read (no I/O in the tracker).
type tracker struct {
	mu  sync.Mutex
	rt  sdf.RTracker
	est *endEstimate // nil for bounded restrictions

	splits atomic.Int64 // successful TrySplit calls with a residual
}

// endEstimate is the last known end of an unbounded restriction.
type endEstimate struct{ end atomic.Int64 }

// Estimate implements offsetrange.RangeEndEstimator.
func (e *endEstimate) Estimate() int64 { return e.end.Load() }

// observe raises the estimate to end.
func (e *endEstimate) observe(end int64) {
	for {
		cur := e.end.Load()
		if end <= cur || e.end.CompareAndSwap(cur, end) {
			return
		}
	}
}

func newTracker(rest offsetrange.Restriction) *tracker {
	if rest.End != unboundedEnd {
		return &tracker{rt: offsetrange.NewTracker(rest)}
	}
	est := &endEstimate{}
	est.end.Store(rest.Start)
	rt, _ := offsetrange.NewGrowableTracker(rest, est) // fails only on a nil estimator
	return &tracker{rt: rt, est: est}
}

// TryClaim claims an offset (an int64); see sdf.RTracker.
func (t *tracker) TryClaim(pos any) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rt.TryClaim(pos)
}

// GetError reports a misuse of the tracker; see sdf.RTracker.
func (t *tracker) GetError() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rt.GetError()
}

// TrySplit splits off the unclaimed part of the restriction; see
// sdf.RTracker.
func (t *tracker) TrySplit(fraction float64) (primary, residual any, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	primary, residual, err = t.rt.TrySplit(fraction)
	if residual != nil && err == nil {
		t.splits.Add(1)
		if h := splitHook.Load(); h != nil {
			(*h)(primary.(offsetrange.Restriction), residual.(offsetrange.Restriction))
		}
	}
	return primary, residual, err
}

// GetProgress reports work done and remaining; see sdf.RTracker.
func (t *tracker) GetProgress() (done, remaining float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rt.GetProgress()
}

// IsDone reports whether the restriction is fully claimed; see
// sdf.RTracker.
func (t *tracker) IsDone() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rt.IsDone()
}

// GetRestriction returns the current offsetrange.Restriction.
func (t *tracker) GetRestriction() any {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rt.GetRestriction()
}

// IsBounded reports whether the restriction has an end.
func (t *tracker) IsBounded() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rt.(sdf.BoundableRTracker).IsBounded()
}

// rest returns the current restriction.
func (t *tracker) rest() offsetrange.Restriction {
	return t.GetRestriction().(offsetrange.Restriction)
}

// finish claims the restriction's end, so that a restriction whose last
// offsets hold no records (transaction markers, compaction) is done; it
// returns the end.
func (t *tracker) finish() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	end := t.rt.GetRestriction().(offsetrange.Restriction).End
	t.rt.TryClaim(end) // false: at the end
	return end
}

// truncate ends the restriction after the last claimed offset, dropping
// the rest (Until, drain): a split at fraction 0 whose residual is not
// handed back to the runner. It returns the new end.
func (t *tracker) truncate() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, _, _ := t.rt.TrySplit(0)
	if r, ok := p.(offsetrange.Restriction); ok {
		return r.End
	}
	return t.rt.GetRestriction().(offsetrange.Restriction).End
}

// splitHook, when set (tests), sees every split with a residual.
var splitHook atomic.Pointer[func(primary, residual offsetrange.Restriction)]

// wmEstimator is the read's watermark estimator: the latest record
// timestamp emitted (the SDK reports each emitted element's event time),
// and, while a partition has nothing new, the wall clock less the idle
// lag. It is read by the runner's split and checkpoint calls while the
// DoFn emits, hence atomic.
type wmEstimator struct{ ms atomic.Int64 }

// CurrentWatermark implements sdf.WatermarkEstimator.
func (e *wmEstimator) CurrentWatermark() time.Time { return time.UnixMilli(e.ms.Load()) }

// ObserveTimestamp implements sdf.TimestampObservingEstimator.
func (e *wmEstimator) ObserveTimestamp(t time.Time) { e.advance(t.UnixMilli()) }

func (e *wmEstimator) advance(ms int64) {
	for {
		cur := e.ms.Load()
		if ms <= cur || e.ms.CompareAndSwap(cur, ms) {
			return
		}
	}
}
