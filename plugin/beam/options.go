package riffbeam

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/riffle-go/riffle"
)

// Errors.
var (
	// ErrInvalidOption: Read or Write was given options that do not fit
	// together (no brokers, no topic, CommitOffsets without a Group, ...).
	// It matches riffle.ErrInvalidConfig too.
	ErrInvalidOption = fmt.Errorf("riffbeam: invalid option: %w", riffle.ErrInvalidConfig)
	// ErrUnknownClientOptions: ClientOptions named options that no
	// RegisterClientOptions call registered in the worker binary.
	ErrUnknownClientOptions = errors.New("riffbeam: client options not registered")
)

// ReadOption configures [Read].
type ReadOption func(*readSpec)

// readSpec is what a read's DoFns carry to the workers (JSON: exported
// fields only).
type readSpec struct {
	Brokers       []string
	Topics        []string
	ClientOptions string
	Group         string
	Commit        bool
	StartKind     int8 // 1 earliest, 2 latest, 3 time (StartAt: ms), 0 offset
	StartAt       int64
	NewStartKind  int8 // partitions added later: 0 or 1 earliest, 2 latest, 3 time (NewStartAt: ms)
	NewStartAt    int64
	Unbounded     bool
	UntilMillis   int64 // 0: none
	SplitSize     int64
	PollNanos     int64
	DiscoverNanos int64
	IdleLagNanos  int64
	CommitNanos   int64
	ReadCommitted bool
}

func (s *readSpec) start() riffle.StartOffset {
	switch s.StartKind {
	case 1:
		return riffle.AtEarliest()
	case 2:
		return riffle.AtLatest()
	case 3:
		return riffle.AtTime(time.UnixMilli(s.StartAt))
	}
	return riffle.AtOffset(s.StartAt)
}

// newStart is where partitions an unbounded read discovers after it
// started begin (NewPartitionsStartLatest, NewPartitionsStartTime;
// earliest by default).
func (s *readSpec) newStart() riffle.StartOffset {
	switch s.NewStartKind {
	case 2:
		return riffle.AtLatest()
	case 3:
		return riffle.AtTime(time.UnixMilli(s.NewStartAt))
	}
	return riffle.AtEarliest()
}

// newStartListing is newStart as a riffle.Admin.ListOffsets timestamp.
func (s *readSpec) newStartListing() int64 {
	switch s.NewStartKind {
	case 2:
		return riffle.OffsetLatest
	case 3:
		return s.NewStartAt
	}
	return riffle.OffsetEarliest
}

// commitTimeout bounds each offset commit (CommitTimeout; 0: the default).
func (s *readSpec) commitTimeout() time.Duration {
	if s.CommitNanos <= 0 {
		return defaultCommitTimeout
	}
	return time.Duration(s.CommitNanos)
}

func (s *readSpec) poll() time.Duration     { return time.Duration(s.PollNanos) }
func (s *readSpec) discover() time.Duration { return time.Duration(s.DiscoverNanos) }

// Group plans the read from the consumer group's committed offsets: a
// partition the group has an offset for starts there, the others where
// the start spec puts them (StartEarliest, the default). The group is
// only read, unless CommitOffsets is given too.
func Group(name string) ReadOption { return func(s *readSpec) { s.Group = name } }

// CommitOffsets commits the offsets read as the Group's committed offsets
// when the runner finalizes a bundle (Beam's bundle finalization: after
// the bundle's output is durably committed). Per partition the committed
// offset moves only past offsets whose bundles were all finalized (a
// ranges.Checkpoint, shared by the DoFn instances of one worker process),
// so a read that fails or is retried is read again by the next pipeline
// on the group: at least once. The commits are standalone (no group
// membership), so the group must have no active members: a group with
// members fails the plan with riffle.ErrGroupActive. Before reading, the
// plan commits the offsets it starts from where the group has none, so a
// start spec such as StartLatest is pinned where the read began. A commit
// that fails is retried by the worker process's next commit, or when its
// last read instance is torn down; the package
// documentation (Offset commits) says what holds across processes.
func CommitOffsets() ReadOption { return func(s *readSpec) { s.Commit = true } }

// StartEarliest starts partitions without a committed offset at their log
// start (the default).
func StartEarliest() ReadOption { return func(s *readSpec) { s.StartKind, s.StartAt = 1, 0 } }

// StartLatest starts partitions without a committed offset at their high
// watermark as of the plan.
func StartLatest() ReadOption { return func(s *readSpec) { s.StartKind, s.StartAt = 2, 0 } }

// StartTime starts partitions without a committed offset at their first
// record with a timestamp at or after t.
func StartTime(t time.Time) ReadOption {
	return func(s *readSpec) { s.StartKind, s.StartAt = 3, t.UnixMilli() }
}

// StartOffset starts partitions without a committed offset at offset o.
func StartOffset(o int64) ReadOption { return func(s *readSpec) { s.StartKind, s.StartAt = 0, o } }

// Unbounded makes the read a streaming one: every partition is read from
// its start on, with no end; a partition that is caught up is polled
// again after the poll interval (a process continuation), partitions
// added to the topics are picked up within the discovery interval and
// read from their earliest offset (or where NewPartitionsStartLatest or
// NewPartitionsStartTime says), and the watermark follows the record
// timestamps (and the wall clock, less the idle lag, while a partition
// has nothing new). Without Until it runs until the runner drains or
// cancels the pipeline.
func Unbounded() ReadOption { return func(s *readSpec) { s.Unbounded = true } }

// NewPartitionsStartEarliest starts the partitions an unbounded read
// discovers after it started (partitions added to its topics) at their
// log start, unless the Group has a committed offset for them: every
// record written to them is read, including those written before the
// discovery interval came round. It is the default (ranges'
// NewPartitionsStartAt documents why). Partitions that exist when the read
// starts follow the start spec (StartEarliest, ...) instead.
func NewPartitionsStartEarliest() ReadOption {
	return func(s *readSpec) { s.NewStartKind, s.NewStartAt = 1, 0 }
}

// NewPartitionsStartLatest starts the partitions an unbounded read
// discovers after it started at their high watermark when discovered
// (unless the Group has a committed offset for them): records written to
// a new partition before the read discovers it, up to a discovery
// interval after it was created, are skipped (ranges'
// NewPartitionsStartAt with riffle.AtLatest). Partitions that exist when
// the read starts follow the start spec instead.
func NewPartitionsStartLatest() ReadOption {
	return func(s *readSpec) { s.NewStartKind, s.NewStartAt = 2, 0 }
}

// NewPartitionsStartTime starts the partitions an unbounded read
// discovers after it started at their first record with a timestamp at or
// after t (their high watermark if none), unless the Group has a
// committed offset for them: with t the pipeline's start, a new partition
// is read from what was written since then, however late it is
// discovered. Partitions that exist when the read starts follow the start
// spec instead.
func NewPartitionsStartTime(t time.Time) ReadOption {
	return func(s *readSpec) { s.NewStartKind, s.NewStartAt = 3, t.UnixMilli() }
}

// Until ends the read at time t: each partition is read up to its first
// record whose timestamp is at or after t (which is not emitted), or, once
// the wall clock has passed t, up to where it is caught up; the unbounded
// read discovers new partitions until every partition has such a record or
// the wall clock has passed t. It makes an unbounded read finish by
// itself, e.g. on runners that cannot drain (Prism) or for "read what was
// written before t". In a bounded read it drops the records at or after t.
func Until(t time.Time) ReadOption { return func(s *readSpec) { s.UntilMillis = t.UnixMilli() } }

// SplitSize splits each partition's range into restrictions of at most n
// offsets before reading (initial splitting), so one partition can be read
// by several workers at once. 0, the default, keeps one restriction per
// partition (runners may still split it dynamically). Bounded reads only.
func SplitSize(n int64) ReadOption { return func(s *readSpec) { s.SplitSize = n } }

// PollInterval is how long an unbounded read waits before it polls a
// caught-up partition again (default 500ms).
func PollInterval(d time.Duration) ReadOption { return func(s *readSpec) { s.PollNanos = int64(d) } }

// DiscoveryInterval is how often an unbounded read looks for partitions
// added to its topics (default 10s).
func DiscoveryInterval(d time.Duration) ReadOption {
	return func(s *readSpec) { s.DiscoverNanos = int64(d) }
}

// IdleLag is how far behind the wall clock an unbounded read moves the
// watermark of a partition with nothing new to read (default 2s): records
// produced later with older timestamps than that are late.
func IdleLag(d time.Duration) ReadOption { return func(s *readSpec) { s.IdleLagNanos = int64(d) } }

// CommitTimeout bounds each offset commit made at bundle finalization or
// at a process's last Teardown (default 30s; 0 means the default).
func CommitTimeout(d time.Duration) ReadOption { return func(s *readSpec) { s.CommitNanos = int64(d) } }

// ReadCommitted reads only committed transactional records and plans only
// up to the last stable offset.
func ReadCommitted() ReadOption { return func(s *readSpec) { s.ReadCommitted = true } }

// ReadClientOptions names client options registered with
// RegisterClientOptions, applied (after the seed brokers) to every client
// the read opens.
func ReadClientOptions(name string) ReadOption {
	return func(s *readSpec) { s.ClientOptions = name }
}

func (s *readSpec) validate() error {
	if len(s.Brokers) == 0 {
		return fmt.Errorf("%w: no seed brokers", ErrInvalidOption)
	}
	if len(s.Topics) == 0 {
		return fmt.Errorf("%w: no topics", ErrInvalidOption)
	}
	for _, t := range s.Topics {
		if t == "" {
			return fmt.Errorf("%w: empty topic name", ErrInvalidOption)
		}
	}
	if s.Commit && s.Group == "" {
		return fmt.Errorf("%w: CommitOffsets needs a Group", ErrInvalidOption)
	}
	if s.SplitSize < 0 || s.PollNanos < 0 || s.DiscoverNanos < 0 || s.IdleLagNanos < 0 || s.CommitNanos < 0 {
		return fmt.Errorf("%w: negative size or interval", ErrInvalidOption)
	}
	if s.NewStartKind != 0 && !s.Unbounded {
		return fmt.Errorf("%w: NewPartitionsStart... applies to unbounded reads only", ErrInvalidOption)
	}
	if s.StartKind == 0 && s.StartAt < 0 {
		return fmt.Errorf("%w: negative start offset", ErrInvalidOption)
	}
	return nil
}

// WriteOption configures [Write].
type WriteOption func(*writeSpec)

type writeSpec struct {
	Brokers       []string
	Topic         string
	ClientOptions string
	FlushNanos    int64
}

// WriteClientOptions names client options registered with
// RegisterClientOptions, applied (after the seed brokers) to every client
// the write opens.
func WriteClientOptions(name string) WriteOption {
	return func(s *writeSpec) { s.ClientOptions = name }
}

// FlushTimeout bounds the flush at the end of each bundle (default 2m):
// records not acknowledged by then fail the bundle.
func FlushTimeout(d time.Duration) WriteOption { return func(s *writeSpec) { s.FlushNanos = int64(d) } }

var (
	clientOptsMu sync.RWMutex
	clientOpts   = map[string]func() ([]riffle.Option, error){}
)

// RegisterClientOptions registers, under name, a function that returns
// client options (TLS, SASL, a logger, ...) for the clients that reads and
// writes naming it with ReadClientOptions or WriteClientOptions open. Call it from an init function
// or main before beam.Init, so the worker binary has it too. A second
// registration of a name replaces the first.
func RegisterClientOptions(name string, fn func() ([]riffle.Option, error)) {
	clientOptsMu.Lock()
	defer clientOptsMu.Unlock()
	clientOpts[name] = fn
}

// newClient opens a client on brokers with the named registered options.
func newClient(brokers []string, optsName string) (*riffle.Client, error) {
	opts := []riffle.Option{riffle.SeedBrokers(brokers...)}
	if optsName != "" {
		clientOptsMu.RLock()
		fn, ok := clientOpts[optsName]
		clientOptsMu.RUnlock()
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrUnknownClientOptions, optsName)
		}
		more, err := fn()
		if err != nil {
			return nil, fmt.Errorf("riffbeam: client options %q: %w", optsName, err)
		}
		opts = append(opts, more...)
	}
	return riffle.NewClient(opts...)
}
