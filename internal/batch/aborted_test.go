package batch

import "testing"

// Helpers describing batches by the fields AbortFilter reads.
func data(pid, base, last int64) Batch {
	return Batch{ProducerID: pid, BaseOffset: base, LastOffset: last, Transactional: true, ControlType: ControlUnknown}
}

func idempotent(pid, base, last int64) Batch {
	return Batch{ProducerID: pid, BaseOffset: base, LastOffset: last, ControlType: ControlUnknown}
}

func marker(pid, off int64, typ ControlType) Batch {
	return Batch{ProducerID: pid, BaseOffset: off, LastOffset: off, Transactional: true, Control: true, ControlType: typ}
}

func TestAbortFilter(t *testing.T) {
	type step struct {
		b    Batch
		drop bool
	}
	tests := []struct {
		name    string
		aborted []AbortedTxn
		steps   []step
	}{
		{
			name: "no aborted transactions",
			steps: []step{
				{data(1, 0, 4), false},
				{marker(1, 5, ControlCommit), true},
				{idempotent(2, 6, 6), false},
			},
		},
		{
			name:    "aborted then next transaction delivered",
			aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 0}},
			steps: []step{
				{data(1, 0, 1), true},
				{marker(1, 2, ControlAbort), true},
				{data(1, 3, 3), false},
				{marker(1, 4, ControlCommit), true},
			},
		},
		{
			name:    "interleaved producers",
			aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 0}},
			steps: []step{
				{data(1, 0, 0), true},
				{data(2, 1, 1), false},
				{data(1, 2, 2), true},
				{marker(2, 3, ControlCommit), true},
				{data(2, 4, 4), false},
				{marker(1, 5, ControlAbort), true},
				{data(1, 6, 6), false},
			},
		},
		{
			name:    "abort only from its first offset",
			aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 10}},
			steps: []step{
				{data(1, 0, 1), false}, // an earlier, committed transaction
				{marker(1, 2, ControlCommit), true},
				{data(1, 10, 11), true},
				{marker(1, 12, ControlAbort), true},
				{data(1, 13, 13), false},
			},
		},
		{
			name:    "batch reaching the first offset by its last offset",
			aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 5}},
			steps: []step{
				{data(1, 3, 6), true},
			},
		},
		{
			name:    "non-transactional batches are never aborted",
			aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 0}},
			steps: []step{
				{idempotent(1, 0, 0), false},
				{data(1, 1, 1), true},
			},
		},
		{
			name:    "same producer aborts twice",
			aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 0}, {ProducerID: 1, FirstOffset: 3}},
			steps: []step{
				{data(1, 0, 0), true},
				{marker(1, 1, ControlAbort), true},
				{data(2, 2, 2), false},
				{data(1, 3, 3), true},
				{marker(1, 4, ControlAbort), true},
				{data(1, 5, 5), false},
			},
		},
		{
			name:    "unsorted aborted list",
			aborted: []AbortedTxn{{ProducerID: 2, FirstOffset: 4}, {ProducerID: 1, FirstOffset: 0}},
			steps: []step{
				{data(1, 0, 0), true},
				{data(2, 1, 1), false},
				{marker(1, 2, ControlAbort), true},
				{data(2, 4, 4), true},
				{data(1, 5, 5), false},
			},
		},
		{
			name:    "abort marker of another producer changes nothing",
			aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 0}},
			steps: []step{
				{data(1, 0, 0), true},
				{marker(2, 1, ControlAbort), true},
				{data(1, 2, 2), true},
			},
		},
		{
			name:    "commit marker does not end an aborted transaction",
			aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 0}},
			steps: []step{
				{data(1, 0, 0), true},
				{marker(1, 1, ControlCommit), true},
				{data(1, 2, 2), true},
			},
		},
		{
			name:    "batches without producer are untouched",
			aborted: []AbortedTxn{{ProducerID: -1, FirstOffset: 0}},
			steps: []step{
				{Batch{ProducerID: -1, LastOffset: 0, Transactional: true}, false},
				{Batch{ProducerID: -1, LastOffset: 1}, false},
			},
		},
		{
			name:    "control batch without a marker record",
			aborted: []AbortedTxn{{ProducerID: 1, FirstOffset: 0}},
			steps: []step{
				{data(1, 0, 0), true},
				{marker(1, 1, ControlUnknown), true},
				{data(1, 2, 2), true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(f *AbortFilter) {
				for i, s := range tt.steps {
					if got := f.Drop(&s.b); got != s.drop {
						t.Fatalf("step %d (%+v): Drop = %v, want %v", i, s.b, got, s.drop)
					}
				}
			}
			check(NewAbortFilter(tt.aborted))
			// A reused filter behaves the same.
			f := NewAbortFilter([]AbortedTxn{{ProducerID: 1, FirstOffset: 0}, {ProducerID: 2, FirstOffset: 0}})
			f.Drop(&Batch{ProducerID: 1, LastOffset: 100})
			f.Reset(tt.aborted)
			check(f)
		})
	}
}

func TestAbortFilterZeroValue(t *testing.T) {
	var f AbortFilter
	b := data(1, 0, 0)
	if f.Drop(&b) {
		t.Fatal("zero filter dropped a data batch")
	}
	m := marker(1, 1, ControlCommit)
	if !f.Drop(&m) {
		t.Fatal("zero filter kept a control batch")
	}
	if f.Aborting(1) {
		t.Fatal("zero filter reports an aborting producer")
	}
}

func TestAbortFilterAllocations(t *testing.T) {
	aborted := []AbortedTxn{{1, 0}, {2, 3}, {3, 5}}
	batches := []Batch{data(1, 0, 2), data(2, 3, 4), marker(1, 5, ControlAbort), data(3, 6, 9)}
	f := NewAbortFilter(aborted)
	if a := testing.AllocsPerRun(100, func() {
		f.Reset(aborted)
		for i := range batches {
			f.Drop(&batches[i])
		}
	}); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}
