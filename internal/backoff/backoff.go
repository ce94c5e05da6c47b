// Package backoff computes retry and reconnect delays (KIP-580: exponential
// with jitter, capped) and remembers which addresses are backing off. It is
// pure: callers pass the time and the random number, so every schedule is a
// plain table test.
package backoff

import "time"

// Policy is an exponential backoff: Base doubled per failure up to Max,
// multiplied by a random factor in [1-Jitter, 1+Jitter] (Jitter 0.2 as in
// KIP-580), and never above Max.
type Policy struct {
	Base   time.Duration
	Max    time.Duration
	Jitter float64
}

// Delay returns the wait after the given number of consecutive failures
// (1 for the first failure). rnd is a uniform number in [0, 1).
func (p Policy) Delay(failures int, rnd float64) time.Duration {
	if failures <= 0 || p.Base <= 0 {
		return 0
	}
	d := p.Base
	for i := 1; i < failures && d < p.Max; i++ {
		d *= 2
	}
	if p.Max > 0 && d > p.Max {
		d = p.Max
	}
	f := 1 + p.Jitter*(2*rnd-1)
	d = time.Duration(float64(d) * f)
	if p.Max > 0 && d > p.Max {
		d = p.Max
	}
	return d
}

type state struct {
	failures int
	until    time.Time
}

// Tracker remembers consecutive failures per key (an address) and when each
// may be tried again. A key is never forgotten by failing: it only waits.
// Not safe for concurrent use; its owner serializes access.
type Tracker struct {
	policy Policy
	m      map[string]state
}

// NewTracker returns a tracker using p.
func NewTracker(p Policy) *Tracker { return &Tracker{policy: p, m: make(map[string]state)} }

// Failed records a failure of key at now and returns when it may be retried.
func (t *Tracker) Failed(key string, now time.Time, rnd float64) time.Time {
	s := t.m[key]
	s.failures++
	s.until = now.Add(t.policy.Delay(s.failures, rnd))
	t.m[key] = s
	return s.until
}

// Succeeded clears key's failures.
func (t *Tracker) Succeeded(key string) { delete(t.m, key) }

// ReadyAt returns when key may next be tried (zero time if now).
func (t *Tracker) ReadyAt(key string) time.Time { return t.m[key].until }

// Ready reports whether key may be tried at now.
func (t *Tracker) Ready(key string, now time.Time) bool { return !now.Before(t.m[key].until) }

// Failures returns key's consecutive failures.
func (t *Tracker) Failures(key string) int { return t.m[key].failures }
