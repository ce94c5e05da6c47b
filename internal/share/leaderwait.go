package share

// LeaderWait paces a fetcher whose ShareFetches come back with leader
// errors (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH) that no leader hint
// resolved: the hint named no leader, a broker the client does not know,
// or contradicted the metadata. Until a metadata refresh moves those
// partitions they stay on the fetcher's broker, which answers for them at
// once, so without a pause the fetcher would ask it again and again. A
// fetch that acquired records made progress and needs no pause (the next
// one waits for idle runners); neither does one whose hints moved the
// partitions away.
type LeaderWait struct {
	n int // such fetches in a row
}

// Fetched records a fetch: unresolved says it had leader errors no hint
// resolved, acquired how many records it acquired. It returns how many
// fetches in a row needed a pause, this one included, for the backoff
// (0: fetch again at once).
func (w *LeaderWait) Fetched(unresolved bool, acquired int) int {
	if !unresolved || acquired > 0 {
		w.n = 0
		return 0
	}
	w.n++
	return w.n
}
