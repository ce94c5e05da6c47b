// Package fetch holds the pure parts of fetching: fetch-session
// bookkeeping (KIP-227). The consumer's per-broker fetchers call into it;
// it does no I/O.
package fetch

// TP is a topic partition.
type TP struct {
	Topic     string
	Partition int32
}

// Want is one partition a fetcher wants in its next request.
type Want struct {
	TP
	Offset      int64
	MaxBytes    int32
	LeaderEpoch int32
}

// Session tracks what the broker's fetch session holds, so each request
// carries only partitions that are new or changed and names those to drop.
// A zero Session does full fetches until the broker grants a session.
//
// Usage: Plan builds a request; after the response, call Commit with the
// plan and the response's top-level error and session id (or Fail on a
// network error). Not safe for concurrent use: one fetcher owns it.
type Session struct {
	id       int32
	epoch    int32
	disabled bool        // the broker declined sessions; always full
	cached   map[TP]Want // the broker's view after the last successful response
	spare    map[TP]Want // the previous cache, reused by the next Plan
	// closing is a session this client left (after a failure) that the
	// broker may still hold: the next request closes it (epoch -1, a full
	// fetch without a session) rather than leaving it to expire in the
	// broker's cache.
	closing int32
	// byID: requests name topics by id (Fetch v13+), see Addressing.
	byID bool
}

// Plan is one request's session fields and partitions.
type Plan struct {
	SessionID    int32
	SessionEpoch int32
	Send         []Want // partitions to include (all of them for a full fetch)
	Forget       []TP   // partitions to remove from the session
	Full         bool
	wants        map[TP]Want
	closes       bool // closes session SessionID
}

// Sessions error codes (KIP-227).
const (
	errFetchSessionIDNotFound   = 70
	errInvalidFetchSessionEpoch = 71
	errFetchSessionTopicIDError = 106
)

// Plan returns the next request for wants. Partitions absent from wants
// that the session holds are forgotten: a paused or full partition must
// leave the session or the broker keeps sending its data.
func (s *Session) Plan(wants []Want) Plan {
	m := s.spare
	s.spare = nil
	if m == nil {
		m = make(map[TP]Want, len(wants))
	}
	clear(m)
	for _, w := range wants {
		m[w.TP] = w
	}
	if s.closing != 0 {
		return Plan{SessionID: s.closing, SessionEpoch: -1, Send: wants, Full: true, wants: m, closes: true}
	}
	if s.disabled || s.id == 0 || s.cached == nil {
		epoch := int32(0)
		if s.disabled {
			// -1 asks for no session at all.
			epoch = -1
		}
		return Plan{SessionID: 0, SessionEpoch: epoch, Send: wants, Full: true, wants: m}
	}
	p := Plan{SessionID: s.id, SessionEpoch: s.epoch, wants: m}
	for _, w := range wants {
		if prev, ok := s.cached[w.TP]; !ok || prev != w {
			p.Send = append(p.Send, w)
		}
	}
	for tp := range s.cached {
		if _, ok := m[tp]; !ok {
			p.Forget = append(p.Forget, tp)
		}
	}
	return p
}

// Commit applies the response to a plan: errCode is the response's
// top-level error code and sessionID the session id it returned.
func (s *Session) Commit(p Plan, errCode int16, sessionID int32) {
	if p.closes {
		// Answered at all, the close is done (or the session was
		// already gone); the next request starts a new one.
		s.closing = 0
		if errCode == 0 {
			return
		}
	}
	switch errCode {
	case 0:
	case errFetchSessionIDNotFound:
		s.id, s.epoch, s.cached = 0, 0, nil // gone on the broker
		return
	case errInvalidFetchSessionEpoch, errFetchSessionTopicIDError:
		s.reset()
		return
	default:
		// Other top-level errors say nothing about the session's state
		// on the broker; start over to be safe.
		s.reset()
		return
	}
	if p.Full {
		if sessionID == 0 {
			if p.SessionEpoch == 0 && !s.disabled {
				// The broker declined a session (cache full or
				// sessions off): keep doing full fetches.
				s.disabled = true
			}
			s.id, s.cached = 0, nil
			return
		}
		s.id = sessionID
		s.epoch = 1
		s.spare, s.cached = s.cached, p.wants
		return
	}
	s.spare, s.cached = s.cached, p.wants
	s.epoch = nextEpoch(s.epoch)
}

// Addressing sets whether the next requests name their topics by id
// (Fetch v13+) or by name. A broker keeps a session to the addressing it
// was created with and refuses a request that switches
// (FETCH_SESSION_TOPIC_ID_ERROR), so a switch starts a new session: the
// next request closes the one open and fetches in full.
func (s *Session) Addressing(byID bool) {
	if byID == s.byID {
		return
	}
	s.byID = byID
	if s.id != 0 {
		s.reset()
	}
}

// Close returns the request that closes the session on the broker (epoch
// -1, no partitions), and false when there is none to close. The Session
// starts over afterwards.
func (s *Session) Close() (Plan, bool) {
	id := s.id
	if id == 0 {
		id = s.closing
	}
	s.id, s.epoch, s.cached, s.closing = 0, 0, nil, 0
	if id == 0 {
		return Plan{}, false
	}
	return Plan{SessionID: id, SessionEpoch: -1, Full: true, closes: true}, true
}

// Fail records a request that got no usable response: the broker may or
// may not have applied it, so the next request is a full fetch.
func (s *Session) Fail() { s.reset() }

// ID returns the current session id (0 without a session).
func (s *Session) ID() int32 { return s.id }

// reset starts over, closing the session the broker may still hold.
func (s *Session) reset() {
	if s.id != 0 {
		s.closing = s.id
	}
	s.id, s.epoch, s.cached = 0, 0, nil
}

func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}
