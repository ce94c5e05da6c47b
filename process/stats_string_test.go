package process_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
)

// PartitionStats embeds TopicPartition, whose String would be promoted and
// print only "topic[partition]"; its own String shows every field.
func TestPartitionStatsString(t *testing.T) {
	ps := process.PartitionStats{
		TopicPartition: riffle.TopicPartition{Topic: "events", Partition: 7},
		Committed:      101, Committable: 102, FinishedAbove: 103, Running: 104, Waiting: 105,
		OldestAge: 106 * time.Second, MetadataBytes: 107, Processed: 108, Retries: 109,
		DeadLettered: 110, Skipped: 111, Err: errors.New("boom"),
	}
	want := []string{"events[7]", "Committed:101", "Committable:102", "FinishedAbove:103", "Running:104",
		"Waiting:105", "OldestAge:1m46s", "MetadataBytes:107", "Processed:108", "Retries:109",
		"DeadLettered:110", "Skipped:111", "Err:boom"}
	st := process.Stats{Running: 3, HeldBytes: 4242, Partitions: []process.PartitionStats{ps}}
	for _, out := range []string{fmt.Sprint(ps), fmt.Sprintf("%+v", ps), fmt.Sprintf("%+v", st)} {
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%q lacks %q", out, w)
			}
		}
	}
	if out := fmt.Sprintf("%+v", st); !strings.Contains(out, "HeldBytes:4242") {
		t.Errorf("%q lacks HeldBytes", out)
	}
}
