package riffle

import "sync"

// errLogOnce decides the level a group error is logged at: a member that
// cannot fix an error by itself (an assignor the broker does not know,
// INCONSISTENT_GROUP_PROTOCOL) meets it again on every retry, and saying
// it at Error each time buries everything else. Each distinct error (by
// its text) is logged at Error once, its repeats at Debug, until reset:
// the member joined, so the next failure is news again.
type errLogOnce struct {
	mu   sync.Mutex
	seen map[string]bool
}

// first reports whether err is new since the last reset, and notes it.
func (o *errLogOnce) first(err error) bool {
	msg := err.Error()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen[msg] {
		return false
	}
	if o.seen == nil {
		o.seen = map[string]bool{}
	}
	o.seen[msg] = true
	return true
}

// reset forgets the errors seen: the member is in the group again.
func (o *errLogOnce) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.seen)
}
