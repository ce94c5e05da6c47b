package riffbeam

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/ranges"
)

// sharedCheckpoint is the ranges.Checkpoint of one group, shared by every
// read DoFn instance of the worker process that commits to it, so ranges
// finalized by different instances (a partition split across bundles)
// add up. It lives while an instance holds it.
type sharedCheckpoint struct {
	key  string
	cl   *riffle.Client
	cp   *ranges.Checkpoint
	refs int
	// closing is set when the last holder left: it closes once the
	// checkpoint's last commit is done and it is out of the registry.
	closing chan struct{}
}

var (
	checkpointsMu sync.Mutex
	checkpoints   = map[string]*sharedCheckpoint{}
)

func acquireCheckpoint(spec *readSpec) (*sharedCheckpoint, error) {
	key := fmt.Sprintf("%s|%s|%s|%d|%d|%t", strings.Join(spec.Brokers, ","), spec.ClientOptions, spec.Group, spec.StartKind, spec.StartAt, spec.ReadCommitted)
	checkpointsMu.Lock()
	defer checkpointsMu.Unlock()
	for {
		sc, ok := checkpoints[key]
		if !ok {
			break
		}
		if sc.closing == nil {
			sc.refs++
			return sc, nil
		}
		// The group's last checkpoint is making its last commit: the
		// new one starts from what it committed.
		ch := sc.closing
		checkpointsMu.Unlock()
		<-ch
		checkpointsMu.Lock()
	}
	cl, err := newClient(spec.Brokers, spec.ClientOptions)
	if err != nil {
		return nil, err
	}
	opts := []ranges.Option{ranges.StartAt(spec.start())}
	if spec.ReadCommitted {
		opts = append(opts, ranges.ReadCommitted())
	}
	sc := &sharedCheckpoint{key: key, cl: cl, cp: ranges.NewCheckpoint(cl, spec.Group, opts...), refs: 1}
	checkpoints[key] = sc
	return sc, nil
}

// release drops one instance's hold. The last one out commits what is
// done and not committed yet (a finalization whose commit failed), within
// timeout, before closing the checkpoint's client; an error is logged,
// since Teardown cannot report one (and runners may skip Teardown: this
// commit is best effort). Meanwhile the checkpoint stays in the registry,
// closing, so that a new checkpoint of the group (a new instance's Setup)
// starts only after this last commit, from the offsets it committed, and
// is never overtaken by it; other groups' instances do not wait.
func (sc *sharedCheckpoint) release(timeout time.Duration) {
	checkpointsMu.Lock()
	sc.refs--
	if sc.refs > 0 {
		checkpointsMu.Unlock()
		return
	}
	sc.closing = make(chan struct{})
	checkpointsMu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	if err := sc.cp.Commit(ctx); err != nil {
		slog.Warn("riffbeam: the last commit of a worker process failed; its ranges are read again by the next pipeline", "err", err)
	}
	cancel()
	sc.cl.Close()

	checkpointsMu.Lock()
	delete(checkpoints, sc.key)
	close(sc.closing)
	checkpointsMu.Unlock()
}
