//go:build unix

package main

// rebalance: how long a busy consumer group takes to process every
// partition again after a member joins. A group of 4 members (one client
// each) consumes a topic of 48 partitions that a background producer keeps
// writing to; once the group is settled, a 5th member joins, and the clock
// runs until the group has settled again (every partition owned, the 48
// spread over the 5 members as evenly as possible) and every partition has
// had a record handled by its owner since the join began and since it was
// last assigned. Eager, cooperative-sticky and KIP-848 groups, for Riffle
// and franz-go. The broker (and the background producer) run in a child
// process: this binary re-executed as the hidden kfake-rebalance-server.
//
// Unix only, as produce (whose kfakeServer it reuses).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register("rebalance", "time until all 48 partitions of a busy 4-member group process again after a 5th member joins: eager, cooperative, KIP-848", runRebalance)
	registerHidden("kfake-rebalance-server", runRebalanceServer)
}

// The group's shape and the timeouts every member gets: short ones, suited
// to a benchmark (the clients' defaults are a 3 s heartbeat and a 45 s
// session; KIP-848's heartbeat interval and session timeout are the
// broker's, set on kfake to the same 100 ms and 3 s).
const (
	rebalTopic            = "rebalance"
	rebalPartitions       = 48
	rebalBefore           = 4 // members before the join; the joiner is member 4
	rebalHeartbeat        = 100 * time.Millisecond
	rebalSession          = 3 * time.Second
	rebalRebalanceTimeout = 10 * time.Second
	rebalRevokeTimeout    = 5 * time.Second // Riffle's must be below the rebalance timeout
	rebalSetupCap         = 30 * time.Second
)

// rebalMode is one client in one group mode.
type rebalMode struct {
	client string // riffle or franz-go
	mode   string // eager, cooperative, kip848
	module string
	start  func(env *rebalEnv, member int) (stop func(), err error)
}

func (m rebalMode) name() string { return m.client + "/" + m.mode }

func rebalModes(franzBlock bool) []rebalMode {
	const rm, fm = "github.com/riffle-go/riffle", "github.com/twmb/franz-go"
	riffleWith := func(opts ...riffle.ConsumerOption) func(*rebalEnv, int) (func(), error) {
		return func(env *rebalEnv, m int) (func(), error) { return startRiffleMember(env, m, opts...) }
	}
	franzWith := func(opts ...kgo.Opt) func(*rebalEnv, int) (func(), error) {
		return func(env *rebalEnv, m int) (func(), error) { return startFranzMember(env, m, franzBlock, opts...) }
	}
	return []rebalMode{
		{"riffle", "eager", rm, riffleWith(riffle.Balancers(riffle.RangeBalancer()))},
		{"riffle", "cooperative", rm, riffleWith()}, // CooperativeStickyBalancer is the default
		{"riffle", "kip848", rm, riffleWith(riffle.WithGroupProtocol(riffle.GroupProtocolConsumer))},
		{"franz-go", "eager", fm, franzWith(kgo.Balancers(kgo.RangeBalancer()))},
		{"franz-go", "cooperative", fm, franzWith(kgo.Balancers(kgo.CooperativeStickyBalancer()))},
		// ServerSideBalancer needs a range or sticky balancer first; the
		// cooperative-sticky one maps to the broker's "uniform" assignor,
		// the one Riffle gets by default (it names none).
		{"franz-go", "kip848", fm, franzWith(kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer())},
	}
}

// rebalEnv is what members of one run share.
type rebalEnv struct {
	addr  string
	group string
	work  time.Duration // handler time per batch
	st    *rebalState
}

// isGroupRequest reports whether an API key is one of the group protocol's
// coordination requests: JoinGroup, Heartbeat, SyncGroup (classic) and
// ConsumerGroupHeartbeat (KIP-848). Commits and offset fetches are not
// counted.
func isGroupRequest(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.JoinGroup, kmsg.Heartbeat, kmsg.SyncGroup, kmsg.ConsumerGroupHeartbeat:
		return true
	}
	return false
}

// riffleGroupReqHook counts a Riffle member's group requests.
type riffleGroupReqHook struct{ n *atomic.Int64 }

func (h riffleGroupReqHook) OnBrokerRequest(_ riffle.BrokerInfo, e riffle.RequestEvent) {
	if isGroupRequest(e.APIKey) {
		h.n.Add(1)
	}
}

// franzGroupReqHook counts a kgo member's group requests.
type franzGroupReqHook struct{ n *atomic.Int64 }

func (h franzGroupReqHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if isGroupRequest(key) {
		h.n.Add(1)
	}
}

// startRiffleMember starts one group member on its own riffle.Client (a
// Client carries one group member).
func startRiffleMember(env *rebalEnv, m int, extra ...riffle.ConsumerOption) (func(), error) {
	cl, err := riffle.NewClient(riffle.SeedBrokers(env.addr), riffle.WithHooks(riffleGroupReqHook{&env.st.groupReqs}))
	if err != nil {
		return nil, err
	}
	parts := func(tps []riffle.TopicPartition) []int32 {
		ps := make([]int32, 0, len(tps))
		for _, tp := range tps {
			if tp.Topic == rebalTopic {
				ps = append(ps, tp.Partition)
			}
		}
		return ps
	}
	opts := []riffle.ConsumerOption{
		riffle.ConsumerGroup(env.group),
		riffle.SubscribeTopics(rebalTopic),
		riffle.HeartbeatInterval(rebalHeartbeat),
		riffle.SessionTimeout(rebalSession),
		riffle.RebalanceTimeout(rebalRebalanceTimeout),
		riffle.RevokeTimeout(rebalRevokeTimeout),
		riffle.Runners(rebalPartitions), // every partition's handler may run at once, as with franz-go below
		riffle.HandleBatch(func(ctx context.Context, b *riffle.FetchBatch) error {
			if n := len(b.Records); n > 0 {
				env.st.handle(ctx, m, int(b.Partition), b.Records[0].Offset, b.Records[n-1].Offset, env.work)
			}
			return nil
		}),
		riffle.OnPartitionsAssigned(func(_ context.Context, tps []riffle.TopicPartition) { env.st.assigned(m, parts(tps)) }),
		riffle.OnPartitionsRevoked(func(_ context.Context, tps []riffle.TopicPartition) { env.st.revoked(m, parts(tps)) }),
		riffle.OnPartitionsLost(func(_ context.Context, tps []riffle.TopicPartition) {
			env.st.notes.add("member %d lost %d partitions", m, len(tps))
			env.st.revoked(m, parts(tps))
		}),
		riffle.OnGroupError(func(err error) { env.st.notes.add("group error: %v", err) }),
		riffle.OnPartitionError(func(pe *riffle.PartitionError) { env.st.notes.add("partition error: %v", pe.Err) }),
	}
	cs, err := riffle.NewConsumer(cl, append(opts, extra...)...)
	if err != nil {
		cl.Close()
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cs.Close(ctx)
		cl.Close()
	}, nil
}

// startFranzMember starts one kgo group member with a PollFetches loop that
// hands each polled partition to its own goroutine (as Riffle runs
// partitions' handlers concurrently) and waits for all before polling
// again. kgo's default revoke callback commits; ours must, so it calls
// CommitUncommittedOffsets as that default does. With block, the member uses
// BlockRebalanceOnPoll and allows rebalances after each poll's records.
func startFranzMember(env *rebalEnv, m int, block bool, extra ...kgo.Opt) (func(), error) {
	parts := func(ps map[string][]int32) []int32 { return ps[rebalTopic] }
	opts := []kgo.Opt{
		kgo.SeedBrokers(env.addr),
		kgo.WithHooks(franzGroupReqHook{&env.st.groupReqs}),
		kgo.ConsumerGroup(env.group),
		kgo.ConsumeTopics(rebalTopic),
		kgo.HeartbeatInterval(rebalHeartbeat),
		kgo.SessionTimeout(rebalSession),
		kgo.RebalanceTimeout(rebalRebalanceTimeout),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), // as Riffle's default ResetLatest
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { env.st.assigned(m, parts(ps)) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				env.st.notes.add("commit on revoke: %v", err)
			}
			env.st.revoked(m, parts(ps))
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			if n := len(ps[rebalTopic]); n > 0 {
				env.st.notes.add("member %d lost %d partitions", m, n)
			}
			env.st.revoked(m, parts(ps))
		}),
	}
	if block {
		opts = append(opts, kgo.BlockRebalanceOnPoll())
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			fs.EachError(func(t string, p int32, err error) {
				env.st.notes.add("fetch error %s[%d]: %v", t, p, err)
			})
			var wg sync.WaitGroup
			fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
				if n := len(ftp.Records); n > 0 && ftp.Topic == rebalTopic {
					wg.Go(func() {
						env.st.handle(ctx, m, int(ftp.Partition), ftp.Records[0].Offset, ftp.Records[n-1].Offset, env.work)
					})
				}
			})
			wg.Wait()
			if block {
				cl.AllowRebalance()
			}
		}
	}()
	return func() {
		cancel()
		<-done
		cl.Close()
	}, nil
}

// noteSet collects distinct messages of one run, with counts.

// rebalState tracks, for one run, who owns each partition (from the
// members' assign, revoke and lost callbacks) and when each was last
// handled, and checks that no partition's handler ever runs twice at once.
type rebalState struct {
	inflight   [rebalPartitions]atomic.Int32 // handler calls running now, per partition
	violations atomic.Int64                  // handler calls that began while another on the same partition ran
	groupReqs  atomic.Int64                  // group coordination requests sent by the members (see isGroupRequest)
	notes      noteSet

	mu         sync.Mutex
	owner      [rebalPartitions]int       // member, -1 for none
	resumedAt  [rebalPartitions]time.Time // first handling by the owner since max(since, its assignment); zero if none yet
	lastHandle [rebalPartitions]time.Time
	maxOff     [rebalPartitions]int64 // highest offset handled, -1 before any
	since      time.Time              // handling counts as resumed from here (the join, once it began)

	joined       bool
	ownerAtJoin  [rebalPartitions]int
	revokedAfter [rebalPartitions]bool // revoked or lost since the join
	maxPause     time.Duration         // longest gap without handling of any partition since the join

	trace bool // print callbacks (and first handlings after them) to stderr, timed from the join

	unowned       int64 // batches handled by a member that did not own the partition
	doubleAssign  int64 // partitions assigned to a member while another still owned them
	dups, skipped int64 // records handled again / offsets never handled between two handled ones
}

func newRebalState() *rebalState {
	s := &rebalState{since: time.Now()}
	for p := range rebalPartitions {
		s.owner[p] = -1
		s.maxOff[p] = -1
	}
	return s
}

// tracef prints one trace line, timed from the join (or from the start of
// the run before it). Called with s.mu held.
func (s *rebalState) tracef(format string, args ...any) {
	if s.trace {
		tag := "setup"
		if s.joined {
			tag = "join"
		}
		fmt.Fprintf(os.Stderr, "  %s%+8.1fms  %s\n", tag, float64(time.Since(s.since).Microseconds())/1000, fmt.Sprintf(format, args...))
	}
}

func (s *rebalState) assigned(m int, ps []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tracef("member %d assigned %v", m, ps)
	for _, p := range ps {
		if o := s.owner[p]; o >= 0 && o != m {
			s.doubleAssign++
		}
		s.owner[p] = m
		s.resumedAt[p] = time.Time{}
	}
}

func (s *rebalState) revoked(m int, ps []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tracef("member %d revoked %v", m, ps)
	for _, p := range ps {
		if s.owner[p] == m {
			s.owner[p] = -1
		}
		if s.joined {
			s.revokedAfter[p] = true
		}
	}
}

// handle is every member's handler for a batch of partition p's records,
// offsets first to last: it checks that no other handler call on p is
// running, books the handling, and then works for work (the record
// processing of a busy application).
func (s *rebalState) handle(ctx context.Context, m, p int, first, last int64, work time.Duration) {
	if s.inflight[p].Add(1) > 1 {
		s.violations.Add(1)
		s.notes.add("partition %d handled by two calls at once (one of them member %d)", p, m)
	}
	defer s.inflight[p].Add(-1)
	now := time.Now()
	s.mu.Lock()
	switch {
	case s.owner[p] != m:
		s.unowned++
	case s.resumedAt[p].IsZero() && !now.Before(s.since):
		s.resumedAt[p] = now
		if s.joined && (s.revokedAfter[p] || s.owner[p] != s.ownerAtJoin[p]) {
			s.tracef("member %d handles partition %d again", m, p)
		}
	}
	if s.joined {
		from := s.lastHandle[p]
		if from.Before(s.since) {
			from = s.since
		}
		s.maxPause = max(s.maxPause, now.Sub(from))
	}
	s.lastHandle[p] = now
	if hi := s.maxOff[p]; hi >= 0 {
		if first <= hi {
			s.dups += min(last, hi) - first + 1
		} else if first > hi+1 {
			s.skipped += first - hi - 1
		}
	}
	s.maxOff[p] = max(s.maxOff[p], last)
	s.mu.Unlock()
	if work > 0 {
		t := time.NewTimer(work)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// markJoin starts the measurement: from now on a partition counts as
// processing again only once handled by its owner after this moment.
func (s *rebalState) markJoin() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.since = now
	s.joined = true
	for p := range rebalPartitions {
		s.resumedAt[p] = time.Time{}
		s.ownerAtJoin[p] = s.owner[p]
		s.revokedAfter[p] = false
	}
	s.maxPause = 0
	return now
}

// settled reports whether the group of n members (0..n-1) is settled: every
// partition owned, by one of them, the counts differing by at most one
// (every balancer here spreads one topic's partitions evenly), and every
// partition handled by its owner since it was assigned (and since the join)
// — and if so, the moment that became true (the latest such handling).
func (s *rebalState) settled(n int) (bool, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := make([]int, n)
	var at time.Time
	for p := range rebalPartitions {
		o := s.owner[p]
		if o < 0 || o >= n || s.resumedAt[p].IsZero() {
			return false, time.Time{}
		}
		counts[o]++
		if s.resumedAt[p].After(at) {
			at = s.resumedAt[p]
		}
	}
	lo, hi := rebalPartitions/n, (rebalPartitions+n-1)/n
	for _, c := range counts {
		if c < lo || c > hi {
			return false, time.Time{}
		}
	}
	return true, at
}

// rebalSnap is what a run reports about the rebalance.
type rebalSnap struct {
	kept     int // partitions never revoked or lost from the join until settled
	moved    int // partitions whose owner at the end differs from the owner at the join
	maxPause time.Duration
}

func (s *rebalState) snap() rebalSnap {
	s.mu.Lock()
	defer s.mu.Unlock()
	var r rebalSnap
	for p := range rebalPartitions {
		if !s.revokedAfter[p] {
			r.kept++
		}
		if s.owner[p] != s.ownerAtJoin[p] {
			r.moved++
		}
	}
	r.maxPause = s.maxPause
	return r
}

// waitSettled polls until the group of n members has been settled for
// settle (the ownership and the moment it settled unchanged throughout),
// and returns that moment and the snapshot taken when it was first seen.
// It gives up at deadline (for the condition to first hold) or when ctx
// ends.
func (s *rebalState) waitSettled(ctx context.Context, n int, deadline time.Time, settle time.Duration) (time.Time, rebalSnap, bool) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var seen, at time.Time
	var snap rebalSnap
	for {
		select {
		case <-ctx.Done():
			return time.Time{}, snap, false
		case <-tick.C:
		}
		now := time.Now()
		ok, t := s.settled(n)
		switch {
		case !ok:
			seen = time.Time{}
			if now.After(deadline) {
				return time.Time{}, snap, false
			}
		case seen.IsZero() || !t.Equal(at):
			seen, at, snap = now, t, s.snap()
		case now.Sub(seen) >= settle:
			return at, snap, true
		}
	}
}

// rebalResult is one run of one mode.
type rebalResult struct {
	a          attempt
	snap       rebalSnap
	violations int64
	unowned    int64
	double     int64
	dups       int64
	skipped    int64
	groupType  string
	reqRate    float64 // group requests per member and second in the settled group of 4, before the join
	notes      []string
}

// rebalanceOnce runs one measurement: a fresh broker process, 4 members,
// then the join of a 5th.
func rebalanceOnce(ctx context.Context, mode rebalMode, run int, o rebalOpts) (rebalResult, error) {
	srv, err := startRebalanceServer(ctx, o)
	if err != nil {
		return rebalResult{}, err
	}
	defer func() {
		if _, err := srv.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "rebalance: stopping the broker: %v\n", err)
		}
	}()
	st := newRebalState()
	st.trace = o.trace
	env := &rebalEnv{
		addr:  srv.addr,
		group: fmt.Sprintf("rebalance-%s-%s-%d-%d", mode.client, mode.mode, run, time.Now().UnixNano()),
		work:  o.work,
		st:    st,
	}
	var stops []func()
	var stopsMu sync.Mutex
	defer func() {
		// Close every member at once, each given a few seconds.
		var wg sync.WaitGroup
		for _, stop := range stops {
			wg.Go(func() { cleanupWithin(stop, 5*time.Second) })
		}
		wg.Wait()
	}()
	startMember := func(m int) error {
		stop, err := mode.start(env, m)
		if err != nil {
			return fmt.Errorf("member %d: %w", m, err)
		}
		stopsMu.Lock()
		stops = append(stops, stop)
		stopsMu.Unlock()
		return nil
	}

	// The busy group of 4.
	var wg sync.WaitGroup
	errs := make([]error, rebalBefore)
	for m := range rebalBefore {
		wg.Go(func() { errs[m] = startMember(m) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return rebalResult{}, err
	}
	if _, _, ok := st.waitSettled(ctx, rebalBefore, time.Now().Add(rebalSetupCap), o.settle); !ok {
		if ctx.Err() != nil {
			return rebalResult{}, ctx.Err()
		}
		return rebalResult{
			a:     attempt{err: fmt.Errorf("the group of %d did not settle within %v", rebalBefore, rebalSetupCap)},
			notes: st.notes.list(),
		}, nil
	}

	// One more second of the settled group: its group requests per member
	// and second (heartbeats, at the 100 ms interval, should be about 10).
	r0, w0 := st.groupReqs.Load(), time.Now()
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		return rebalResult{}, ctx.Err()
	}
	res := rebalResult{}
	res.reqRate = float64(st.groupReqs.Load()-r0) / time.Since(w0).Seconds() / rebalBefore

	// The join.
	t0 := st.markJoin()
	if err := startMember(rebalBefore); err != nil {
		res.a = attempt{d: time.Since(t0), err: err}
	} else {
		at, snap, ok := st.waitSettled(ctx, rebalBefore+1, t0.Add(o.cap), o.settle)
		switch {
		case ok:
			res.a = attempt{d: at.Sub(t0)}
			res.snap = snap
			if o.trace {
				fmt.Fprintf(os.Stderr, "  settled at %+.1fms\n", float64(at.Sub(t0).Microseconds())/1000)
			}
		case ctx.Err() != nil:
			return rebalResult{}, ctx.Err()
		default:
			res.a = attempt{d: o.cap, capped: true}
			res.snap = st.snap()
		}
	}
	res.groupType = groupType(ctx, srv.addr, env.group)
	res.violations = st.violations.Load()
	st.mu.Lock()
	res.unowned, res.double, res.dups, res.skipped = st.unowned, st.doubleAssign, st.dups, st.skipped
	st.mu.Unlock()
	res.notes = st.notes.list()
	return res, nil
}

// groupType asks the broker (ListGroups v5) which protocol the group runs:
// "classic" or "consumer" (KIP-848); "?" when it cannot tell.
func groupType(ctx context.Context, addr, group string) string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return "?"
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, cl)
	if err != nil {
		return "?"
	}
	for _, g := range resp.Groups {
		if g.Group == group {
			if g.GroupType == "" {
				return "?"
			}
			return g.GroupType
		}
	}
	return "?"
}

// rebalOpts are the flags.
type rebalOpts struct {
	runs   int
	cap    time.Duration
	settle time.Duration
	work   time.Duration
	rate   int
	size   int
	trace  bool
}

func runRebalance(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("rebalance", flag.ContinueOnError)
	var o rebalOpts
	fs.IntVar(&o.runs, "runs", 3, "runs per mode (in rounds); the median is reported")
	fs.DurationVar(&o.cap, "cap", 60*time.Second, "give up on one run this long after the join began")
	fs.DurationVar(&o.settle, "settle", time.Second, "the group must stay settled this long for a run to end")
	fs.DurationVar(&o.work, "work", 2*time.Millisecond, "handler time per batch of one partition (the application's processing)")
	fs.IntVar(&o.rate, "rate", 12000, "records/s the background producer writes, spread evenly over the partitions")
	fs.IntVar(&o.size, "size", 100, "value bytes per produced record")
	fs.BoolVar(&o.trace, "trace", false, "print every assign and revoke callback, and each moved partition's first handling, to stderr")
	only := fs.String("modes", "", "comma-separated modes to run, e.g. riffle/eager,franz-go/kip848 (default all)")
	franzBlock := fs.Bool("franz-block", false, "give franz-go kgo.BlockRebalanceOnPoll (rebalances wait for the poll's records to be handled, as Riffle's revoke waits for running handlers)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.runs < 1 || o.cap <= 0 || o.settle <= 0 || o.work < 0 || o.rate < rebalPartitions || o.size < 1 {
		return fmt.Errorf("-runs, -cap, -settle, -size must be positive, -work not negative, -rate at least %d", rebalPartitions)
	}
	all := rebalModes(*franzBlock)
	modes := all
	if *only != "" {
		modes = nil
		for n := range strings.SplitSeq(*only, ",") {
			n = strings.TrimSpace(n)
			i := slices.IndexFunc(all, func(m rebalMode) bool { return m.name() == n })
			if i < 0 {
				return fmt.Errorf("unknown mode %q", n)
			}
			modes = append(modes, all[i])
		}
	}

	fmt.Printf("rebalance: 1 topic of %d partitions, a background producer writing %d records/s of %d bytes spread over them;\n",
		rebalPartitions, o.rate, o.size)
	fmt.Printf("a group of %d members (one client each) handling every batch for %v; then a 5th member joins.\n", rebalBefore, o.work)
	fmt.Printf("timed: from just before the 5th member's client is created until the group is settled again (48 partitions owned,\n")
	fmt.Printf("spread evenly over 5 members, for %v after) and every partition has had a batch handled by its owner since the join\n", o.settle)
	fmt.Printf("began and since it was last assigned. Members: heartbeat %v, session timeout %v, rebalance timeout %v (Riffle also\n",
		rebalHeartbeat, rebalSession, rebalRebalanceTimeout)
	fmt.Printf("revoke timeout %v, Runners(48)); start at the latest offset. franz-go polls with PollFetches and handles each partition\n", rebalRevokeTimeout)
	fmt.Printf("in its own goroutine; BlockRebalanceOnPoll %v. KIP-848 broker configs: group.consumer.heartbeat.interval.ms=100,\n", *franzBlock)
	fmt.Printf("group.consumer.session.timeout.ms=3000. A fresh kfake broker (child process, with the producer) and group per run.\n")
	fmt.Printf("riffle %s, franz-go %s; %d runs per mode, cap %v after the join; load average before: %s\n\n",
		modVersion("github.com/riffle-go/riffle"), modVersion("github.com/twmb/franz-go"), o.runs, o.cap, loadAvg())

	results := map[string][]rebalResult{}
	for r := range o.runs {
		for _, m := range modes {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			res, err := rebalanceOnce(ctx, m, r+1, o)
			if err != nil {
				return fmt.Errorf("run %d, %s: %w", r+1, m.name(), err)
			}
			fmt.Fprintf(os.Stderr, "rebalance: run %d %-20s %s\n", r+1, m.name(), res.a.String(o.cap))
			results[m.name()] = append(results[m.name()], res)
			time.Sleep(200 * time.Millisecond)
		}
	}

	medians := map[string]time.Duration{}
	// A mode whose settled members send group requests at more than three
	// times the heartbeat rate is flagged: its rebalance time reflects
	// that traffic, not the 100 ms interval every other mode runs at.
	normalRate := float64(time.Second / rebalHeartbeat)
	flagged := map[string]float64{}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tgroup\tmedian\truns\tkept\tmoved\tmax pause\tgroup req/s\tviolations\tunowned\tdup recs\tskipped recs\t  note")
	for _, m := range modes {
		rs := results[m.name()]
		var ds, pauses []time.Duration
		var rates []float64
		var runs, kept, moved, types []string
		var viol, unowned, double, dups, skipped int64
		var notes []string
		for _, x := range rs {
			ds = append(ds, x.a.effective(o.cap))
			runs = append(runs, x.a.String(o.cap))
			kept = append(kept, strconv.Itoa(x.snap.kept))
			moved = append(moved, strconv.Itoa(x.snap.moved))
			pauses = append(pauses, x.snap.maxPause)
			rates = append(rates, x.reqRate)
			if !slices.Contains(types, x.groupType) {
				types = append(types, x.groupType)
			}
			viol += x.violations
			unowned += x.unowned
			double += x.double
			dups += x.dups
			skipped += x.skipped
			if x.a.err != nil {
				notes = append(notes, "error: "+oneLine(x.a.err, 80))
			}
			notes = append(notes, x.notes...)
		}
		if double > 0 {
			notes = append([]string{fmt.Sprintf("%d assignments while another member owned the partition", double)}, notes...)
		}
		medians[m.name()] = median(ds)
		slices.Sort(notes)
		notes = slices.Compact(notes)
		if len(notes) > 4 {
			notes = append(notes[:4], fmt.Sprintf("… %d more", len(notes)-4))
		}
		slices.Sort(rates)
		if r := rates[len(rates)/2]; r > 3*normalRate {
			flagged[m.name()] = r
			notes = append([]string{fmt.Sprintf("FLAGGED: %.0f group requests/s per settled member, %.0f× the heartbeat interval's %.0f/s", r, r/normalRate, normalRate)}, notes...)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%d\t%d\t%d\t%d\t  %s\n",
			m.name(), strings.Join(types, ","), fmtDur(medians[m.name()]), strings.Join(runs, " "),
			strings.Join(kept, " "), strings.Join(moved, " "), fmtDur(median(pauses)), rates[len(rates)/2],
			viol, unowned, dups, skipped, strings.Join(notes, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println()
	fmt.Println("median: of the runs' times (a capped or failed run counts as the cap); runs: every run in order (>cap: not settled by the cap).")
	fmt.Println("group: the protocol the broker reports for the group (ListGroups v5): classic or consumer (KIP-848).")
	fmt.Println("kept: partitions never revoked or lost from the join until settled, per run (they kept processing through the rebalance);")
	fmt.Println("moved: partitions whose owner changed, per run; max pause: median over runs of the longest gap, after the join, between")
	fmt.Println("two handled batches of one partition. group req/s: JoinGroup, SyncGroup, Heartbeat and ConsumerGroupHeartbeat requests")
	fmt.Println("per member and second in the settled group of 4 during the second before the join (median over runs; the 100 ms")
	fmt.Println("heartbeat interval makes about 10). violations: handler calls that began while another call on the same partition was")
	fmt.Println("running (two members at once), all runs; unowned: batches handled by a member outside its assign..revoke callbacks;")
	fmt.Println("dup recs: records handled again (at-least-once redelivery after a move); skipped recs: offsets never handled between two")
	fmt.Println("handled ones of a partition. Counts are summed over the runs, from the group's start to the end of the measurement.")
	fmt.Printf("load average after: %s\n", loadAvg())

	best := func(client string, skipFlagged bool) (string, time.Duration) {
		name, d := "", time.Duration(0)
		for _, m := range modes {
			if _, f := flagged[m.name()]; m.client != client || (skipFlagged && f) {
				continue
			}
			if md := medians[m.name()]; name == "" || md < d {
				name, d = m.name(), md
			}
		}
		return name, d
	}
	rn, rd := best("riffle", false)
	fn, fd := best("franz-go", false)
	_, rf := flagged[rn]
	_, ff := flagged[fn]
	if rf || ff {
		rn2, rd2 := best("riffle", true)
		fn2, fd2 := best("franz-go", true)
		fmt.Printf("note: the best mode of a side is FLAGGED (group request rate far above the heartbeat interval), so the ratio below\n")
		if rn2 != "" && fn2 != "" {
			fmt.Printf("compares a busy-heartbeating mode; among unflagged modes: %s (median %s) vs %s (median %s), ratio %.2f\n",
				rn2, fmtDur(rd2), fn2, fmtDur(fd2), rd2.Seconds()/fd2.Seconds())
		} else {
			fmt.Printf("compares a busy-heartbeating mode; no unflagged mode on one side\n")
		}
	}
	switch {
	case rn == "" || fn == "":
		fmt.Println("rebalance riffle/franz-go time ratio: n/a (riffle or franz-go not run)")
	default:
		fmt.Printf("best riffle mode: %s (median %s); best franz-go mode: %s (median %s)\n", rn, fmtDur(rd), fn, fmtDur(fd))
		fmt.Printf("rebalance riffle/franz-go time ratio: %.2f\n", rd.Seconds()/fd.Seconds())
	}
	return nil
}

// startRebalanceServer re-executes this binary as kfake-rebalance-server
// and waits for the broker address it prints (after the producer's first
// records are written).
func startRebalanceServer(ctx context.Context, o rebalOpts) (*kfakeServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to start the broker: %w", err)
	}
	cmd := exec.Command(exe, "kfake-rebalance-server",
		"-topic", rebalTopic,
		"-partitions", strconv.Itoa(rebalPartitions),
		"-rate", strconv.Itoa(o.rate),
		"-size", strconv.Itoa(o.size),
		"-broker-config", "group.consumer.heartbeat.interval.ms=100",
		"-broker-config", "group.consumer.session.timeout.ms=3000",
	)
	return startServerProcess(ctx, cmd)
}

// configFlags is a repeatable -broker-config key=value flag.
type configFlags map[string]string

func (c configFlags) String() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + c[k])
	}
	return b.String()
}

func (c configFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want key=value", s)
	}
	c[k] = v
	return nil
}

// runRebalanceServer is the child process: one kfake broker with the topic
// seeded and the given broker configs, a group minimum session timeout low
// enough for 3 s sessions (kfake's default minimum is 6 s), and a
// background producer writing -rate records/s round-robin over the
// partitions. It prints "addr host:port" once the first records are
// written, and runs until stdin reaches EOF or a signal arrives.
func runRebalanceServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("kfake-rebalance-server", flag.ContinueOnError)
	topic := fs.String("topic", rebalTopic, "topic to create")
	partitions := fs.Int("partitions", rebalPartitions, "its partitions")
	rate := fs.Int("rate", 12000, "records/s to produce in the background (0: none)")
	size := fs.Int("size", 100, "value bytes per record")
	minSession := fs.Duration("min-session-timeout", 500*time.Millisecond, "group.min.session.timeout")
	cfgs := configFlags{}
	fs.Var(cfgs, "broker-config", "key=value broker config (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(*partitions), *topic),
		kfake.GroupMinSessionTimeout(*minSession),
	}
	if len(cfgs) > 0 {
		opts = append(opts, kfake.BrokerConfigs(cfgs))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	if len(addrs) != 1 {
		return fmt.Errorf("kfake listens on %d addresses, want 1", len(addrs))
	}

	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	pdone := make(chan struct{})
	if *rate > 0 {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(addrs[0]),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(2*time.Millisecond),
		)
		if err != nil {
			return err
		}
		defer cl.Close()
		value := make([]byte, *size)
		for i := range value {
			value[i] = 'a' + byte(i%26)
		}
		// One record per partition synchronously first, so consumers
		// find a live topic.
		var first []*kgo.Record
		for p := range *partitions {
			first = append(first, &kgo.Record{Topic: *topic, Partition: int32(p), Value: value})
		}
		if err := cl.ProduceSync(ctx, first...).FirstErr(); err != nil {
			return fmt.Errorf("first records: %w", err)
		}
		go func() {
			defer close(pdone)
			produceSteadily(pctx, cl, *topic, *partitions, *rate, value)
		}()
	} else {
		close(pdone)
	}
	fmt.Printf("addr %s\n", addrs[0])

	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	sctx, stop := signal.NotifyContext(ctx, syscall.SIGHUP)
	defer stop()
	select {
	case <-eof:
	case <-sctx.Done():
	}
	pcancel()
	select {
	case <-pdone:
	case <-time.After(2 * time.Second):
	}
	return nil
}

// produceSteadily writes rate records/s, round-robin over the partitions,
// in slices every 5 ms, until ctx ends. The first error is logged.
func produceSteadily(ctx context.Context, cl *kgo.Client, topic string, partitions, rate int, value []byte) {
	const step = 5 * time.Millisecond
	tick := time.NewTicker(step)
	defer tick.Stop()
	var logged atomic.Bool
	cb := func(_ *kgo.Record, err error) {
		if err != nil && ctx.Err() == nil && logged.CompareAndSwap(false, true) {
			fmt.Fprintf(os.Stderr, "kfake-rebalance-server: producing: %v\n", err)
		}
	}
	start := time.Now()
	sent, p := 0, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		due := int(time.Since(start).Seconds() * float64(rate))
		for ; sent < due && ctx.Err() == nil; sent++ {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(p), Value: value}, cb)
			p = (p + 1) % partitions
		}
	}
}
