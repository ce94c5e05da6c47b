package share

import (
	"reflect"
	"testing"
	"time"
)

func TestKeepAlive(t *testing.T) {
	t0 := time.Unix(1000, 0)
	nine := KeepAlive{Idle: 9 * time.Minute}
	for _, tc := range []struct {
		name string
		k    KeepAlive
		last time.Time
		held int
		open bool
		now  time.Time
		at   time.Time // zero: none needed
		due  bool
	}{
		{"holding, quiet less than nine tenths", nine, t0, 3, true, t0.Add(8 * time.Minute), t0.Add(486 * time.Second), false},
		{"holding, quiet nine tenths", nine, t0, 3, true, t0.Add(486 * time.Second), t0.Add(486 * time.Second), true},
		{"holding, quiet past the idle timeout", nine, t0, 1, true, t0.Add(10 * time.Minute), t0.Add(486 * time.Second), true},
		{"holding nothing", nine, t0, 0, true, t0.Add(time.Hour), time.Time{}, false},
		{"no session", nine, t0, 5, false, t0.Add(time.Hour), time.Time{}, false},
		{"no connection", nine, time.Time{}, 5, true, t0.Add(time.Hour), time.Time{}, false},
		{"disabled", KeepAlive{}, t0, 5, true, t0.Add(time.Hour), time.Time{}, false},
		{"short idle", KeepAlive{Idle: 300 * time.Millisecond}, t0, 1, true, t0.Add(270 * time.Millisecond), t0.Add(270 * time.Millisecond), true},
		{"clock before last use", nine, t0, 1, true, t0.Add(-time.Second), t0.Add(486 * time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, ok := tc.k.At(tc.last, tc.held, tc.open)
			if ok != !tc.at.IsZero() || !at.Equal(tc.at) {
				t.Errorf("At = %v, %v; want %v", at, ok, tc.at)
			}
			if due := tc.k.Due(tc.now, tc.last, tc.held, tc.open); due != tc.due {
				t.Errorf("Due = %v, want %v", due, tc.due)
			}
		})
	}
}

func TestSplitRenew(t *testing.T) {
	tp1 := TP{ID: [16]byte{2}, Partition: 1}
	in := []PartAcks{
		{TP: tp0, Batches: []Range{{1, 2, Accept}, {3, 3, Renew}, {4, 4, Release}}},
		{TP: tp1, Batches: []Range{{5, 9, Renew}}},
		{TP: TP{ID: [16]byte{3}}, Batches: []Range{{0, 0, Gap}}},
	}
	final, renew := SplitRenew(in)
	wantF := []PartAcks{
		{TP: tp0, Batches: []Range{{1, 2, Accept}, {4, 4, Release}}},
		{TP: TP{ID: [16]byte{3}}, Batches: []Range{{0, 0, Gap}}},
	}
	wantR := []PartAcks{
		{TP: tp0, Batches: []Range{{3, 3, Renew}}},
		{TP: tp1, Batches: []Range{{5, 9, Renew}}},
	}
	if !reflect.DeepEqual(final, wantF) || !reflect.DeepEqual(renew, wantR) {
		t.Fatalf("final %+v renew %+v", final, renew)
	}
	if f, r := SplitRenew(nil); f != nil || r != nil {
		t.Fatalf("nil: %v %v", f, r)
	}
}
