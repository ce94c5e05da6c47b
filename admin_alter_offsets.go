package riffle

import (
	"context"
	"fmt"
)

// AlterGroupOffsets commits offsets as group's committed offsets: the offset
// of the next record to read on each partition, as a consumer commits
// them. It is for tools that track progress themselves (ranges
// checkpoints, batch jobs) and want lag tools to see it.
//
// The group must be inactive (Empty, or Dead, which includes a group that
// does not exist yet and is created by the commit); otherwise the call
// fails with ErrGroupActive and nothing is committed: its members would
// overwrite the offsets with their own. The commit is a "simple" one
// (generation -1, no member id), which the coordinator also rejects, as
// ErrGroupActive, if a member joins in the meantime. A negative offset
// fails with ErrInvalidConfig.
func (a *Admin) AlterGroupOffsets(ctx context.Context, group string, offsets map[TopicPartition]int64) error {
	for tp, o := range offsets {
		if o < 0 {
			return fmt.Errorf("%w: negative offset %d for %s", ErrInvalidConfig, o, tp)
		}
	}
	if len(offsets) == 0 {
		return nil
	}
	if err := a.checkInactive(ctx, group); err != nil {
		return err
	}
	return a.simpleCommit(ctx, group, offsets)
}
