package share

import "time"

// KeepAlive decides when a fetcher must send its broker a request for no
// other reason than to keep its share session's connection open. A
// broker closes a connection that has been quiet for its
// connections.max.idle.ms, and closing it ends the share session and
// releases every record acquired through it: a member whose handlers all
// run for longer than that, with nothing to fetch, acknowledge or renew
// meanwhile, would lose their records to other members.
type KeepAlive struct {
	// Idle is the brokers' idle timeout; 0 never asks for a keep-alive.
	Idle time.Duration
}

// Quiet is how long the connection may stay quiet: nine tenths of Idle,
// the tenth left for the request's trip and timers firing late.
func (k KeepAlive) Quiet() time.Duration { return k.Idle - k.Idle/10 }

// At returns when a keep-alive is due for a connection last used (a
// request sent or answered) at last, and false when none is needed: no
// records held or no session open (nothing the broker could release), no
// connection (last is zero: the session went with it), or no Idle.
func (k KeepAlive) At(last time.Time, held int, open bool) (time.Time, bool) {
	if k.Idle <= 0 || held <= 0 || !open || last.IsZero() {
		return time.Time{}, false
	}
	return last.Add(k.Quiet()), true
}

// Due says whether a keep-alive must go out at now.
func (k KeepAlive) Due(now, last time.Time, held int, open bool) bool {
	at, ok := k.At(last, held, open)
	return ok && !now.Before(at)
}
