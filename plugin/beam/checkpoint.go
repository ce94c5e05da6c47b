package riffbeam

import (
	"fmt"
	"strings"
	"sync"

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
}

var (
	checkpointsMu sync.Mutex
	checkpoints   = map[string]*sharedCheckpoint{}
)

func acquireCheckpoint(spec *readSpec) (*sharedCheckpoint, error) {
	key := fmt.Sprintf("%s|%s|%s|%d|%d|%t", strings.Join(spec.Brokers, ","), spec.ClientOptions, spec.Group, spec.StartKind, spec.StartAt, spec.ReadCommitted)
	checkpointsMu.Lock()
	defer checkpointsMu.Unlock()
	if sc, ok := checkpoints[key]; ok {
		sc.refs++
		return sc, nil
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

func (sc *sharedCheckpoint) release() {
	checkpointsMu.Lock()
	defer checkpointsMu.Unlock()
	sc.refs--
	if sc.refs == 0 {
		delete(checkpoints, sc.key)
		sc.cl.Close()
	}
}
