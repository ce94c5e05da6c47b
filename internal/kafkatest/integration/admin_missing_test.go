package integration_test

import (
	"errors"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// Partition-addressed Admin calls on a topic that does not exist fail it
// with ErrUnknownTopic once their metadata lookups give up
// (UnknownTopicWait, 2 s here), never hanging; a partition missing from a
// topic that exists fails with ErrUnknownTopicOrPartition, not
// ErrUnknownTopic (it is known, so nothing waits for it). The bounds are
// hang guards of a loaded machine's size, not speed checks.
func TestAdminMissingTopic(t *testing.T) {
	need(t)
	cl := client(t, riffle.UnknownTopicWait(2*time.Second))
	adm := cl.Admin()
	ctx := timeout(t, 4*time.Minute)
	ghost := riffle.TopicPartition{Topic: name(t, "ghost"), Partition: 0}
	tp := topic(t, cl, 1, nil)
	eventually(t, time.Minute, "the topic known", func() error {
		_, err := adm.ListOffsets(ctx, riffle.OffsetLatest, tp)
		return err
	})
	beyond := riffle.TopicPartition{Topic: tp, Partition: 5}
	for _, c := range []struct {
		call string
		run  func(riffle.TopicPartition) error
	}{
		{"ListOffsets", func(p riffle.TopicPartition) error {
			los, err := adm.ListOffsets(ctx, riffle.OffsetLatest, p.Topic)
			if err != nil {
				return err
			}
			for _, lo := range los {
				if lo.Partition == p.Partition {
					return lo.Err
				}
			}
			return riffle.ErrUnknownTopicOrPartition // no such partition listed
		}},
		{"DescribeProducers", func(p riffle.TopicPartition) error {
			ps, err := adm.DescribeProducers(ctx, p)
			if err != nil {
				return err
			}
			return ps[0].Err
		}},
		{"DeleteRecords", func(p riffle.TopicPartition) error {
			ds, err := adm.DeleteRecords(ctx, map[riffle.TopicPartition]int64{p: 0})
			if err != nil {
				return err
			}
			return ds[0].Err
		}},
		{"AbortTransaction", func(p riffle.TopicPartition) error {
			return adm.AbortTransaction(ctx, riffle.AbortTransactionSpec{TopicPartition: p, ProducerID: 1, ProducerEpoch: 0})
		}},
	} {
		start := time.Now()
		err := c.run(ghost)
		took := time.Since(start)
		t.Logf("%s of a missing topic: %v after %v", c.call, err, took.Round(time.Millisecond))
		if !errors.Is(err, riffle.ErrUnknownTopic) || took > 30*time.Second {
			t.Errorf("%s of a missing topic: %v after %v, want ErrUnknownTopic within 30s", c.call, err, took)
		}
		start = time.Now()
		err = c.run(beyond)
		took = time.Since(start)
		if !errors.Is(err, riffle.ErrUnknownTopicOrPartition) || errors.Is(err, riffle.ErrUnknownTopic) || took > 30*time.Second {
			t.Errorf("%s of a missing partition: %v after %v, want ErrUnknownTopicOrPartition, not a wait", c.call, err, took)
		}
	}
}
