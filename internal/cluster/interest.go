package cluster

import "slices"

// interest decides which topics a metadata refresh asks about, and so which
// topics the snapshot holds. Pure: the metadata owner calls it under its lock.
//
//   - Tracked topics are reference counted by their owners (a producer's
//     topics, a consumer's assigned partitions, a group's subscription):
//     refreshed while anyone holds them, dropped after the last release.
//   - One-off lookups (Admin.ListOffsets, range reads, a group leader's
//     assignment) add nothing to the refresh set: their topics ride along
//     with the next refresh and stay cached in the snapshot until the one
//     after. A later refresh asks again only for the ones looked up since
//     the previous refresh, so a topic in use stays fresh and one looked
//     up once is gone within two refreshes (at most two MetadataMaxAge
//     periods when nothing else refreshes; Java's producer drops topics
//     idle for metadata.max.idle.ms, 5 min, for the same reason).
type interest struct {
	tracked map[string]int
	oneOff  map[string]bool // cached one-off topic -> looked up since the last refresh
}

func newInterest() *interest {
	return &interest{tracked: map[string]int{}, oneOff: map[string]bool{}}
}

// track adds one reference to each topic.
func (in *interest) track(topics ...string) {
	for _, t := range topics {
		in.tracked[t]++
		delete(in.oneOff, t)
	}
}

// untrack releases one reference to each topic; a topic nobody holds any
// more is left out of the next refresh. Releasing more than was tracked is
// ignored.
func (in *interest) untrack(topics ...string) {
	for _, t := range topics {
		switch n := in.tracked[t]; {
		case n > 1:
			in.tracked[t] = n - 1
		case n == 1:
			delete(in.tracked, t)
			// Still in the snapshot until the next refresh: cached
			// like a one-off lookup, so a lookup meanwhile keeps it.
			in.oneOff[t] = false
		}
	}
}

func (in *interest) isTracked(t string) bool { return in.tracked[t] > 0 }

// used records a lookup of t served from the snapshot. A cached one-off
// topic is asked about again by the next refresh.
func (in *interest) used(t string) {
	if _, ok := in.oneOff[t]; ok {
		in.oneOff[t] = true
	}
}

// plan returns the topics the next refresh asks about, sorted and without
// duplicates: tracked topics, cached one-off topics looked up
// since the last refresh, and extra (the one-off lookups waiting for it).
func (in *interest) plan(extra []string) []string {
	out := make([]string, 0, len(in.tracked)+len(extra))
	for t := range in.tracked {
		out = append(out, t)
	}
	for t, used := range in.oneOff {
		if used {
			out = append(out, t)
		}
	}
	out = append(out, extra...)
	slices.Sort(out)
	return slices.Compact(out)
}

// refreshed records a successful refresh that asked about asked (sorted):
// the snapshot now holds exactly those topics, so cached one-off topics
// not among them are gone, and the untracked ones among them are cached
// and unused.
func (in *interest) refreshed(asked []string) {
	for t := range in.oneOff {
		if _, ok := slices.BinarySearch(asked, t); !ok {
			delete(in.oneOff, t)
		}
	}
	for _, t := range asked {
		if !in.isTracked(t) {
			in.oneOff[t] = false
		}
	}
}
