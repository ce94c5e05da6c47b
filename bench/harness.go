package main

// Helpers shared by the subcommands: capped timing of one attempt, means and
// medians, duration formatting and module versions for table headers.

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// attempt is how one timed run of one client went.
type attempt struct {
	d      time.Duration // time until fn returned; the cap when capped
	err    error         // what fn returned, when it failed before the cap
	capped bool          // fn had not finished when the cap ran out
}

// effective is the duration an attempt counts for in means, medians and
// ratios: an attempt that hit the cap or gave up with an error never got
// there in time, so it counts as the cap.
func (a attempt) effective(limit time.Duration) time.Duration {
	if a.capped || a.err != nil {
		return limit
	}
	return a.d
}

// String renders one attempt for the runs column.
func (a attempt) String(limit time.Duration) string {
	switch {
	case a.capped:
		return ">" + fmtDur(limit)
	case a.err != nil:
		return "err@" + fmtDur(a.d)
	default:
		return fmtDur(a.d)
	}
}

// timeCapped runs fn and times it, giving up after limit. fn gets a context
// that is cancelled at the limit, but need not honour it: fn runs in its own
// goroutine, so a constructor that ignores contexts (sarama's) is simply
// abandoned. fn returns a cleanup function (may be nil), which is called
// once fn has returned — at once, or later in the background if fn
// outlived the limit — and which is given a few seconds before it is
// abandoned in turn, so a slow Close cannot stall the next run.
func timeCapped(parent context.Context, limit time.Duration, fn func(ctx context.Context) (cleanup func(), err error)) attempt {
	type outcome struct {
		cleanup func()
		err     error
		d       time.Duration
	}
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		c, err := fn(ctx)
		done <- outcome{c, err, time.Since(start)}
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case o := <-done:
		cleanupWithin(o.cleanup, 5*time.Second)
		if o.err != nil && (ctx.Err() != nil || o.d >= limit) {
			// Gave up because our context ran out: that is the cap.
			return attempt{d: limit, capped: true}
		}
		return attempt{d: o.d, err: o.err}
	case <-timer.C:
		go func() { cleanupWithin((<-done).cleanup, 5*time.Second) }()
		return attempt{d: limit, capped: true}
	case <-parent.Done():
		go func() { cleanupWithin((<-done).cleanup, 5*time.Second) }()
		return attempt{d: time.Since(start), err: parent.Err()}
	}
}

// cleanupWithin runs fn, waiting at most limit for it.
func cleanupWithin(fn func(), limit time.Duration) {
	if fn == nil {
		return
	}
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// mean returns the arithmetic mean of ds, or 0 for no durations.
func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// median returns the median of ds (the mean of the middle two for an even
// count). It returns 0 for no durations.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// fmtDur prints a duration at a precision fit for a table: microseconds
// below a millisecond, milliseconds below a second, else seconds with two
// decimals.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// modVersion returns the version of a dependency module as built into this
// binary, or "?" when unknown. The root module is reported as "(local)",
// since the bench module replaces it with the working tree.
func modVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "?"
	}
	for _, m := range bi.Deps {
		if m.Path == path {
			if m.Replace != nil {
				return "(local)"
			}
			return m.Version
		}
	}
	return "?"
}

// oneLine shortens an error message to a single line of at most n runes,
// for table cells.
func oneLine(err error, n int) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
