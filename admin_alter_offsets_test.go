package riffle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestAdminAlterGroupOffsets(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := cl.Admin()
	if err := adm.AlterGroupOffsets(ctx, "g", map[TopicPartition]int64{{"t", 0}: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("negative offset: %v", err)
	}
	if err := adm.AlterGroupOffsets(ctx, "g", nil); err != nil {
		t.Fatalf("nothing to commit: %v", err)
	}
	want := map[TopicPartition]int64{{"t", 0}: 0, {"t", 1}: 7}
	if err := adm.AlterGroupOffsets(ctx, "g", want); err != nil {
		t.Fatal(err)
	}
	got, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[TopicPartition{"t", 0}].Offset != 0 || got[TopicPartition{"t", 1}].Offset != 7 {
		t.Fatalf("committed %v, want %v", got, want)
	}
}
