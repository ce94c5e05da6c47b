package conn

import (
	"fmt"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const maxKey = 128

// Versions is the outcome of ApiVersions negotiation: per API key, the
// highest version both the broker and this client support.
type Versions struct {
	known [maxKey]bool
	min   [maxKey]int16
	max   [maxKey]int16
	caps  map[int16]int16
	// idCaps replace caps for requests that name every topic by id.
	idCaps map[int16]int16
	// features are the cluster's finalized feature levels the broker
	// reported (KIP-584), e.g. transaction.version; nil if none.
	features map[string]int16
}

func newVersions(resp *kmsg.ApiVersionsResponse, caps, idCaps map[int16]int16) Versions {
	var v Versions
	v.caps, v.idCaps = caps, idCaps
	for _, k := range resp.ApiKeys {
		if k.ApiKey < 0 || int(k.ApiKey) >= maxKey || k.MaxVersion < k.MinVersion {
			continue
		}
		v.known[k.ApiKey] = true
		v.min[k.ApiKey] = k.MinVersion
		v.max[k.ApiKey] = k.MaxVersion
	}
	if resp.FinalizedFeaturesEpoch >= 0 {
		// Epoch -1: the broker has not learned the cluster's levels.
		for _, f := range resp.FinalizedFeatures {
			if v.features == nil {
				v.features = map[string]int16{}
			}
			v.features[f.Name] = f.MaxVersionLevel
		}
	}
	return v
}

// Feature returns the finalized level of a cluster feature as the broker
// reported it in ApiVersions (KIP-584), 0 when it reported none: e.g.
// transaction.version 2 enables KIP-890 transactions.
func (v *Versions) Feature(name string) int16 { return v.features[name] }

// Max returns the version to use for key given our own maximum, and false
// when there is none both sides support.
func (v *Versions) Max(key, ours int16) (int16, bool) {
	return v.capped(v.caps, key, ours)
}

func (v *Versions) capped(caps map[int16]int16, key, ours int16) (int16, bool) {
	if key < 0 || int(key) >= maxKey || !v.known[key] {
		return 0, false
	}
	if c, ok := caps[key]; ok && c < ours {
		ours = c
	}
	use := min(ours, v.max[key])
	if use < v.min[key] {
		return 0, false
	}
	return use, true
}

// MinVersioned is a request that must not be sent below a version: one
// that sets a field older versions would silently drop (e.g.
// CreateTopics' ValidateOnly, v1+).
type MinVersioned interface {
	MinVersion() int16
}

// Pick returns the version to send req at: min(our max, broker max),
// under the caps for requests that name every topic by id if req does
// (ByTopicID). A request the broker has no usable version of fails with an
// *errs.UnsupportedError (matching ErrUnsupported) naming, for the APIs
// older brokers lack, the KIP and the Kafka release that brought it; one
// that is MinVersioned fails so below its minimum.
func (v *Versions) Pick(req kmsg.Request) (int16, error) {
	caps := v.caps
	if ByTopicID(req) {
		caps = v.idCaps
	}
	key := req.Key()
	use, ok := v.capped(caps, key, req.MaxVersion())
	if !ok {
		detail := "the broker has no version of it"
		if key >= 0 && int(key) < maxKey && v.known[key] {
			detail = fmt.Sprintf("the broker has v%d to v%d, none of them usable (the client's are up to v%d)", v.min[key], v.max[key], req.MaxVersion())
		}
		return 0, errs.Unsupported(key, kmsg.NameForKey(key), -1, detail)
	}
	if m, isMin := req.(MinVersioned); isMin && use < m.MinVersion() {
		return 0, errs.Unsupported(key, kmsg.NameForKey(key), m.MinVersion(), fmt.Sprintf("the broker has up to v%d", use))
	}
	return use, nil
}

// FetchByID is a Fetch whose sender addresses topics by id: every topic
// and forgotten topic in it carries its id, and its fetch session (if
// any) was opened by id. It may go at the versions that name topics by
// id only (v13+). The sender says so, rather than the request showing
// it: a Fetch naming no topic (an incremental fetch with nothing new, a
// session's close) must go at the addressing of its session, and a
// broker refuses a by-name session's fetch at v13+ and a by-id
// session's below (FETCH_SESSION_TOPIC_ID_ERROR). A plain
// *kmsg.FetchRequest goes by name.
type FetchByID struct{ *kmsg.FetchRequest }

// AsFetch returns req's Fetch, plain or FetchByID.
func AsFetch(req kmsg.Request) (*kmsg.FetchRequest, bool) {
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		return r, true
	case FetchByID:
		return r.FetchRequest, r.FetchRequest != nil
	}
	return nil, false
}

// ByTopicID reports whether req may go at a version that addresses topics
// by id only: a FetchByID.
func ByTopicID(req kmsg.Request) bool {
	_, ok := req.(FetchByID)
	return ok
}
