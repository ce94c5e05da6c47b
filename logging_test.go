package riffle

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// The default handler passes warnings (with their attributes and groups)
// to slog.Default's handler and drops everything below.
func TestDefaultLogHandler(t *testing.T) {
	var buf bytes.Buffer
	base := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	old := slog.Default()
	slog.SetDefault(slog.New(base))
	defer slog.SetDefault(old)

	log := slog.New(defaultLogHandler{}).With("client", "c1").WithGroup("g")
	log.Info("routine")
	log.Debug("noise")
	log.Warn("partition stopped", "partition", 3)
	out := buf.String()
	if strings.Contains(out, "routine") || strings.Contains(out, "noise") {
		t.Fatalf("below warning got through: %q", out)
	}
	if !strings.Contains(out, "partition stopped") || !strings.Contains(out, "client=c1") || !strings.Contains(out, "g.partition=3") {
		t.Fatalf("warning missing or without its attributes: %q", out)
	}
}

// Issue 10, point 13: a partition stopped by a handler error is not
// silent: it is logged at WARN, and Close reports it (partition, offset,
// cause) even with no OnPartitionError callback.
func TestStoppedPartitionReported(t *testing.T) {
	fake := newFake(t, kfake.SeedTopics(2, "t"))
	buf := &syncWriter{w: new(bytes.Buffer)}
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...),
		Logger(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	var recs []*Record
	for p := int32(0); p < 2; p++ {
		for range 10 {
			recs = append(recs, &Record{Topic: "t", Partition: p, Value: []byte("v")})
		}
	}
	produceRecords(t, cl, recs)
	boom := errors.New("boom")
	handled := make(chan struct{}, 100)
	cs, err := NewConsumer(cl, HandleRecord(func(_ context.Context, r *Record) error {
		handled <- struct{}{}
		if r.Partition == 1 && r.Offset == 4 {
			return boom
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	assignAll(t, cs, "t", 2, AtEarliest())
	waitUntil(t, 20*time.Second, func() bool { return len(handled) >= 15 }, func() string { return statsString(cs) })
	// The handler signals before it returns the error: wait for the
	// partition to be stopped, not just for the call.
	waitUntil(t, 20*time.Second, func() bool {
		for _, ps := range cs.Stats().Partitions {
			if ps.Partition == 1 && ps.Err != nil {
				return true
			}
		}
		return false
	}, func() string { return statsString(cs) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cs.Close(ctx)
	var stopped *StoppedPartitionsError
	if !errors.As(err, &stopped) || len(stopped.Partitions) != 1 || !errors.Is(err, boom) {
		t.Fatalf("close: %v, want partition 1 reported stopped by boom", err)
	}
	if pe := stopped.Partitions[0]; pe.Partition != 1 || pe.Offset != 4 {
		t.Fatalf("stopped %+v, want t[1] at offset 4", pe)
	}
	if !strings.Contains(buf.String(), "partition stopped") {
		t.Fatalf("no warning logged: %q", buf.String())
	}
}

// syncWriter serializes writes from the client's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
