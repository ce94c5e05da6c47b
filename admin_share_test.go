package riffle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestAdminShareGroupOffsets covers the share-group admin calls against
// kfake: ListShareGroups lists share groups only (not a consumer group),
// AlterShareGroupOffsets sets start offsets that Describe reads back and a
// member starts from, both refuse a group with members, and
// DeleteShareGroupOffsets drops the group's state for a topic.
func TestAdminShareGroupOffsets(t *testing.T) {
	fake := newShareFake(t, 2, time.Minute)
	cl := shareClient(t, fake)
	produceN(t, cl, "t", 2, 10)
	ad := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// No share group yet; a consumer group is not listed.
	if gs, err := ad.ListShareGroups(ctx); err != nil || len(gs) != 0 {
		t.Fatalf("ListShareGroups before any: %v, %v", gs, err)
	}
	if err := ad.AlterGroupOffsets(ctx, "classic", map[TopicPartition]int64{{"t", 0}: 1}); err != nil {
		t.Fatal(err)
	}

	// Alter on a group without members creates its state.
	res, err := ad.AlterShareGroupOffsets(ctx, "g", map[TopicPartition]int64{{"t", 0}: 3, {"t", 1}: 7})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[TopicPartition{"t", 0}] != nil || res[TopicPartition{"t", 1}] != nil {
		t.Fatalf("alter: %v", res)
	}
	offs, err := ad.DescribeShareGroupOffsets(ctx, "g", "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 2 || offs[0].TopicPartition != (TopicPartition{"t", 0}) || offs[0].StartOffset != 3 ||
		offs[1].TopicPartition != (TopicPartition{"t", 1}) || offs[1].StartOffset != 7 || offs[0].Err != nil || offs[1].Err != nil {
		t.Fatalf("describe after alter: %+v", offs)
	}
	// Without topics: every topic the group has state for.
	if all, err := ad.DescribeShareGroupOffsets(ctx, "g"); err != nil || len(all) != 2 || all[1].StartOffset != 7 {
		t.Fatalf("describe all: %+v, %v", all, err)
	}

	// A member starts at the altered offsets: 7 + 3 records.
	s := newSeen(10)
	sc := newShareMember(t, fake, HandleRecord(func(_ context.Context, r *Record) error {
		if r.Partition == 0 && r.Offset < 3 || r.Partition == 1 && r.Offset < 7 {
			t.Errorf("got %d@%d, below the altered start", r.Partition, r.Offset)
		}
		s.add(r)
		return nil
	}))
	waitDone(t, s.done, "the records from the altered offsets")

	gs, err := ad.ListShareGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 1 || gs[0].Group != "g" {
		t.Fatalf("ListShareGroups: %+v, want only g (not the consumer group)", gs)
	}
	if d, err := ad.DescribeShareGroups(ctx, "g"); err != nil || len(d) != 1 || len(d[0].Members) != 1 || d[0].Members[0].MemberID != sc.MemberID() {
		t.Fatalf("DescribeShareGroups: %+v, %v", d, err)
	}

	// Both refuse a group with members.
	if res, err := ad.AlterShareGroupOffsets(ctx, "g", map[TopicPartition]int64{{"t", 0}: 0}); !errors.Is(err, ErrNonEmptyGroup) && !errors.Is(res[TopicPartition{"t", 0}], ErrNonEmptyGroup) {
		t.Fatalf("alter with a member: %v, %v", res, err)
	}
	if res, err := ad.DeleteShareGroupOffsets(ctx, "g", "t"); !errors.Is(err, ErrNonEmptyGroup) && (len(res) != 1 || !errors.Is(res[0].Err, ErrNonEmptyGroup)) {
		t.Fatalf("delete with a member: %v, %v", res, err)
	}
	closeShare(t, sc)
	assertShareDrained(t, cl, "g", "t", 2, 10)

	// Delete: the group's state for t is gone.
	dres, err := ad.DeleteShareGroupOffsets(ctx, "g", "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(dres) != 1 || dres[0].Topic != "t" || dres[0].Err != nil {
		t.Fatalf("delete: %+v", dres)
	}
	if offs, err := ad.DescribeShareGroupOffsets(ctx, "g", "t"); err != nil {
		t.Fatal(err)
	} else {
		for _, o := range offs {
			if o.StartOffset >= 0 && o.Err == nil {
				t.Errorf("after delete: %+v still has a start offset", o)
			}
		}
	}
	// An unknown group.
	if _, err := ad.DeleteShareGroupOffsets(ctx, "nope", "t"); err == nil {
		t.Errorf("delete for an unknown group: no error")
	}
}

// A broker message that is the error code's own description (Kafka sends
// Errors.message() when it has nothing more to say, e.g. NON_EMPTY_GROUP
// from AlterShareGroupOffsets on Kafka 4.4) is not repeated after the
// error; a message that says more is kept.
func TestWithMessageSkipsTheCodesDescription(t *testing.T) {
	code := int16(68) // NON_EMPTY_GROUP
	desc := "The group is not empty."
	if got, want := withMessage(code, &desc).Error(), KafkaErrorForCode(code).Error(); got != want {
		t.Errorf("with the code's description: %q, want %q", got, want)
	}
	more := "group g has 1 member"
	if got := withMessage(code, &more).Error(); !strings.HasSuffix(got, ": "+more) || !errors.Is(withMessage(code, &more), KafkaErrorForCode(code)) {
		t.Errorf("with a message of its own: %q", got)
	}
	if withMessage(0, &more) != nil {
		t.Error("no error code gave an error")
	}
}
