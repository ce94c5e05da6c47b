package backoff

import (
	"testing"
	"time"
)

func TestPolicyDelay(t *testing.T) {
	p := Policy{Base: 50 * time.Millisecond, Max: time.Second, Jitter: 0.2}
	tests := []struct {
		failures int
		rnd      float64
		want     time.Duration
	}{
		{0, 0.5, 0},
		{1, 0.5, 50 * time.Millisecond},
		{2, 0.5, 100 * time.Millisecond},
		{3, 0.5, 200 * time.Millisecond},
		{5, 0.5, 800 * time.Millisecond},
		{6, 0.5, time.Second},
		{60, 0.5, time.Second}, // no overflow
		{1, 0, 40 * time.Millisecond},
		{1, 0.75, 55 * time.Millisecond},
		{10, 0.99, time.Second}, // jitter never exceeds the cap
		{10, 0, 800 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := p.Delay(tt.failures, tt.rnd); got != tt.want {
			t.Errorf("Delay(%d, %v) = %v, want %v", tt.failures, tt.rnd, got, tt.want)
		}
	}
}

func TestTracker(t *testing.T) {
	tr := NewTracker(Policy{Base: 100 * time.Millisecond, Max: time.Second})
	now := time.Unix(1000, 0)
	if !tr.Ready("a", now) {
		t.Fatal("unknown key must be ready")
	}
	until := tr.Failed("a", now, 0.5)
	if until != now.Add(100*time.Millisecond) || tr.Ready("a", now) {
		t.Fatalf("after one failure until=%v", until)
	}
	until = tr.Failed("a", now, 0.5)
	if until != now.Add(200*time.Millisecond) || tr.Failures("a") != 2 {
		t.Fatalf("after two failures until=%v", until)
	}
	if !tr.Ready("a", now.Add(200*time.Millisecond)) {
		t.Fatal("key must come back after its backoff")
	}
	tr.Succeeded("a")
	if tr.Failures("a") != 0 || !tr.Ready("a", now) {
		t.Fatal("success must reset")
	}
}
