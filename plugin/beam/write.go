package riffbeam

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/riffle-go/riffle"
)

func init() {
	register.DoFn2x1[context.Context, Record, error](&writeFn{})
}

const defaultFlushTimeout = 2 * time.Minute

// Write produces every [Record] of col to the cluster at brokers, with
// Riffle's idempotent producer (acks=all), to the record's Topic, or to
// topic when that is empty; partitions come from the producer's default
// partitioner (by key). Each bundle's records are flushed when the bundle
// finishes, and a record that could not be written fails the bundle, so a
// bundle that succeeded is durably written; a bundle the runner retries
// is written again (at least once). Invalid arguments panic; TryWrite
// returns them.
func Write(s beam.Scope, brokers []string, topic string, col beam.PCollection, opts ...WriteOption) {
	if err := TryWrite(s, brokers, topic, col, opts...); err != nil {
		panic(err)
	}
}

// TryWrite is Write returning an error (matching ErrInvalidOption for
// invalid arguments) instead of panicking.
func TryWrite(s beam.Scope, brokers []string, topic string, col beam.PCollection, opts ...WriteOption) error {
	spec := writeSpec{Brokers: slices.Clone(brokers), Topic: topic, FlushNanos: int64(defaultFlushTimeout)}
	for _, o := range opts {
		o(&spec)
	}
	if len(spec.Brokers) == 0 {
		return fmt.Errorf("%w: no seed brokers", ErrInvalidOption)
	}
	if spec.FlushNanos <= 0 {
		return fmt.Errorf("%w: FlushTimeout must be positive", ErrInvalidOption)
	}
	if !col.IsValid() || col.Type().Type() != reflect.TypeOf(Record{}) {
		return fmt.Errorf("%w: Write takes a PCollection of riffbeam.Record", ErrInvalidOption)
	}
	s = s.Scope("riffbeam.Write")
	_, err := beam.TryParDo(s, &writeFn{Spec: spec}, col)
	return err
}

// writeFn produces records; one producer per DoFn instance.
type writeFn struct {
	Spec writeSpec

	cl *riffle.Client
	p  *riffle.Producer

	mu  sync.Mutex
	err error // the bundle's first failed record
}

// Setup opens the client and the producer.
func (fn *writeFn) Setup() error {
	cl, err := newClient(fn.Spec.Brokers, fn.Spec.ClientOptions)
	if err != nil {
		return err
	}
	p, err := riffle.NewProducer(cl)
	if err != nil {
		cl.Close()
		return err
	}
	fn.cl, fn.p = cl, p
	return nil
}

// StartBundle forgets the errors of a previous bundle.
func (fn *writeFn) StartBundle(context.Context) {
	fn.mu.Lock()
	fn.err = nil
	fn.mu.Unlock()
}

// ProcessElement hands the record to the producer; a record of this
// bundle that already failed fails the bundle now.
func (fn *writeFn) ProcessElement(ctx context.Context, r Record) error {
	if err := fn.failed(); err != nil {
		return err
	}
	rec := r.toRiffle(fn.Spec.Topic)
	if rec.Topic == "" {
		return fmt.Errorf("%w: a record without a topic and no default topic", ErrInvalidOption)
	}
	fn.p.Produce(ctx, rec, fn.done)
	return nil
}

func (fn *writeFn) done(rec *riffle.Record, err error) {
	if err == nil {
		return
	}
	fn.mu.Lock()
	defer fn.mu.Unlock()
	if fn.err == nil {
		fn.err = fmt.Errorf("riffbeam: writing to %s: %w", rec.Topic, err)
	}
}

func (fn *writeFn) failed() error {
	fn.mu.Lock()
	defer fn.mu.Unlock()
	return fn.err
}

// FinishBundle waits until every record of the bundle is acknowledged
// (within FlushTimeout) and fails the bundle if one was not written.
func (fn *writeFn) FinishBundle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(fn.Spec.FlushNanos))
	defer cancel()
	if err := fn.p.Flush(ctx); err != nil {
		return fmt.Errorf("riffbeam: flushing the bundle's records: %w", err)
	}
	return fn.failed()
}

// Teardown closes the producer (delivering what is buffered, within a
// minute) and the client.
func (fn *writeFn) Teardown() {
	if fn.p != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		fn.p.Close(ctx)
		cancel()
	}
	if fn.cl != nil {
		fn.cl.Close()
	}
}
