package riffle

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestShareConsumerRefusedOptions: every consumer option whose meaning a
// share group does not have is refused with ErrInvalidConfig, whatever
// its value (also the value that is the default), and the error names the
// option and what to do instead. The same options still build a regular
// consumer.
func TestShareConsumerRefusedOptions(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	h := HandleRecord(func(context.Context, *Record) error { return nil })
	for _, tc := range []struct {
		name    string
		opt     ConsumerOption
		regular bool     // NewConsumer (group "c", topic "t") accepts it
		want    []string // in the error besides the option's name
	}{
		{"ExactlyOnce", ExactlyOnce(nil, CommitEvery{}), false, []string{"no offsets to commit in a transaction"}},
		{"Isolation", Isolation(ReadCommitted), true, []string{"share.isolation.level", "AlterGroupConfigs", "--group"}},
		{"Isolation", Isolation(ReadUncommitted), true, []string{"share.isolation.level"}},
		{"OffsetReset", OffsetReset(ResetEarliest), true, []string{"share.auto.offset.reset", "AlterGroupConfigs", "AlterShareGroupOffsets"}},
		{"OffsetReset", OffsetReset(ResetLatest), true, []string{"share.auto.offset.reset"}},
		{"OffsetReset", OffsetReset(ResetNone), true, []string{"share.auto.offset.reset"}},
		{"OnPartitionError", OnPartitionError(func(*PartitionError) {}), true, []string{"stops no partition", "Stats"}},
		{"InstanceID", InstanceID("i-1"), true, []string{"no static membership"}},
		{"SubscribePattern", SubscribePattern(regexp.MustCompile("t.*")), false, []string{"SubscribeTopics"}},
		{"MaxBatchRecords", MaxBatchRecords(10), true, []string{"ShareMaxRecords"}},
	} {
		_, err := NewShareConsumer(cl, ShareGroup("g"), SubscribeTopics("t"), h, tc.opt)
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err %v, want ErrInvalidConfig", tc.name, err)
			continue
		}
		for _, w := range append([]string{tc.name + " is not supported"}, tc.want...) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.name, err, w)
			}
		}
		if tc.regular { // the refusal is the share consumer's alone
			c, err := NewConsumer(cl, ConsumerGroup("c"), SubscribeTopics("t"), h, tc.opt)
			if err != nil {
				t.Errorf("%s: NewConsumer: %v", tc.name, err)
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if _, err := c.Close(ctx); err != nil {
				t.Errorf("%s: Close: %v", tc.name, err)
			}
			cancel()
		}
	}
}
