package txn

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

var errCause = errors.New("cause")

// Steps that take a Machine from Uninitialized to each state, v1.
var reach = map[State][]func(*Machine) error{
	Uninitialized: nil,
	Initializing:  {(*Machine).Init},
	Ready:         {(*Machine).Init, initialized},
	InTransaction: {(*Machine).Init, initialized, begin},
	Committing:    {(*Machine).Init, initialized, begin, (*Machine).BeginCommit},
	Aborting:      {(*Machine).Init, initialized, begin, (*Machine).BeginAbort},
	AbortableError: {(*Machine).Init, initialized, begin, func(m *Machine) error {
		m.Fail(Abortable, errCause)
		return nil
	}},
	FatalError: {func(m *Machine) error {
		m.Fail(Fatal, errCause)
		return nil
	}},
}

func initialized(m *Machine) error { m.Initialized(); return nil }
func begin(m *Machine) error       { return m.Begin(false) }

func machineIn(t *testing.T, s State) *Machine {
	t.Helper()
	m := &Machine{}
	for i, f := range reach[s] {
		if err := f(m); err != nil {
			t.Fatalf("reaching %s, step %d: %v", s, i, err)
		}
	}
	if m.State() != s {
		t.Fatalf("reached %s, want %s", m.State(), s)
	}
	return m
}

// errClass names the class of err for the tables: "", state, abortable,
// fatal, fenced.
func errClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrFenced):
		return "fenced"
	case errors.Is(err, ErrFatal):
		return "fatal"
	case errors.Is(err, ErrAbortable):
		return "abortable"
	case errors.Is(err, ErrState):
		return "state"
	}
	return "other: " + err.Error()
}

// Every call in every state: the error class it returns and the state it
// leaves. The rows are Java's TransactionManager.isTransitionValid, plus
// resuming a commit or abort that was cut short.
func TestTransitions(t *testing.T) {
	calls := map[string]func(*Machine) error{
		"Init":        (*Machine).Init,
		"Begin":       begin,
		"CheckSend":   (*Machine).CheckSend,
		"BeginCommit": (*Machine).BeginCommit,
		"BeginAbort":  (*Machine).BeginAbort,
		"Offsets":     (*Machine).CheckOffsets,
	}
	type want struct {
		err   string
		state State
	}
	table := map[State]map[string]want{
		Uninitialized: {
			"Init": {"", Initializing}, "Begin": {"state", Uninitialized}, "CheckSend": {"state", Uninitialized},
			"BeginCommit": {"state", Uninitialized}, "BeginAbort": {"state", Uninitialized}, "Offsets": {"state", Uninitialized},
		},
		Initializing: {
			"Init": {"", Initializing}, "Begin": {"state", Initializing}, "CheckSend": {"state", Initializing},
			"BeginCommit": {"state", Initializing}, "BeginAbort": {"state", Initializing}, "Offsets": {"state", Initializing},
		},
		Ready: {
			"Init": {"state", Ready}, "Begin": {"", InTransaction}, "CheckSend": {"state", Ready},
			"BeginCommit": {"state", Ready}, "BeginAbort": {"state", Ready}, "Offsets": {"state", Ready},
		},
		InTransaction: {
			"Init": {"state", InTransaction}, "Begin": {"state", InTransaction}, "CheckSend": {"", InTransaction},
			"BeginCommit": {"", Committing}, "BeginAbort": {"", Aborting}, "Offsets": {"", InTransaction},
		},
		Committing: {
			"Init": {"state", Committing}, "Begin": {"state", Committing}, "CheckSend": {"state", Committing},
			"BeginCommit": {"", Committing}, "BeginAbort": {"", Aborting}, "Offsets": {"state", Committing},
		},
		Aborting: {
			"Init": {"state", Aborting}, "Begin": {"state", Aborting}, "CheckSend": {"state", Aborting},
			"BeginCommit": {"state", Aborting}, "BeginAbort": {"", Aborting}, "Offsets": {"state", Aborting},
		},
		AbortableError: {
			"Init": {"state", AbortableError}, "Begin": {"abortable", AbortableError}, "CheckSend": {"abortable", AbortableError},
			"BeginCommit": {"abortable", AbortableError}, "BeginAbort": {"", Aborting}, "Offsets": {"abortable", AbortableError},
		},
		FatalError: {
			"Init": {"fatal", FatalError}, "Begin": {"fatal", FatalError}, "CheckSend": {"fatal", FatalError},
			"BeginCommit": {"fatal", FatalError}, "BeginAbort": {"fatal", FatalError}, "Offsets": {"fatal", FatalError},
		},
	}
	for from, row := range table {
		for name, w := range row {
			t.Run(fmt.Sprintf("%s/%s", from, name), func(t *testing.T) {
				m := machineIn(t, from)
				err := calls[name](m)
				if got := errClass(err); got != w.err {
					t.Errorf("error %q (%v), want %q", got, err, w.err)
				}
				if m.State() != w.state {
					t.Errorf("state %s, want %s", m.State(), w.state)
				}
			})
		}
	}
}

// A commit whose EndTxn may have reached the coordinator can only be
// finished by committing; before that, it may still be aborted.
func TestAbortAfterCommitSent(t *testing.T) {
	m := machineIn(t, Committing)
	m.EndSent()
	if err := m.BeginAbort(); errClass(err) != "state" || m.State() != Committing {
		t.Fatalf("abort after EndTxn(commit) sent: %v, state %s", err, m.State())
	}
	if err := m.BeginCommit(); err != nil || m.State() != Committing {
		t.Fatalf("resume commit: %v, state %s", err, m.State())
	}
	m.Completed()
	if m.State() != Ready {
		t.Fatalf("state %s after Completed", m.State())
	}
}

// Fail: abortable errors move an open or committing transaction to
// AbortableError and keep the first cause; while aborting they leave the
// abort going; fatal errors are final; retriable actions change nothing.
func TestFail(t *testing.T) {
	first, second := errors.New("first"), errors.New("second")
	for _, tc := range []struct {
		from  State
		a     Action
		state State
		class string
	}{
		{InTransaction, Abortable, AbortableError, "abortable"},
		{InTransaction, AbortableBump, AbortableError, "abortable"},
		{Committing, Abortable, AbortableError, "abortable"},
		{Aborting, Abortable, Aborting, "abortable"},
		{Ready, Abortable, Ready, "abortable"},
		{InTransaction, Fatal, FatalError, "fatal"},
		{InTransaction, Fenced, FatalError, "fenced"},
		{Aborting, Fenced, FatalError, "fenced"},
		{Ready, Fatal, FatalError, "fatal"},
		{InTransaction, Retry, InTransaction, "other: first"},
		{InTransaction, Relocate, InTransaction, "other: first"},
	} {
		t.Run(fmt.Sprintf("%s/%s", tc.from, tc.a), func(t *testing.T) {
			m := machineIn(t, tc.from)
			err := m.Fail(tc.a, first)
			if errClass(err) != tc.class || m.State() != tc.state {
				t.Fatalf("Fail: %v (%s), state %s; want %s, %s", err, errClass(err), m.State(), tc.class, tc.state)
			}
			if tc.class != "other: first" && !errors.Is(err, first) {
				t.Fatalf("%v does not wrap its cause", err)
			}
			if m.State() == AbortableError || m.State() == FatalError {
				// A second error keeps the first cause.
				m.Fail(tc.a, second)
				if !errors.Is(m.Err(), first) || errors.Is(m.Err(), second) {
					t.Fatalf("after a second error: %v", m.Err())
				}
			}
		})
	}
	m := machineIn(t, InTransaction)
	m.Fail(Abortable, first)
	if err := m.Fail(Fenced, second); !errors.Is(err, ErrFenced) || !errors.Is(err, ErrFatal) || !errors.Is(err, second) {
		t.Fatalf("fatal after abortable: %v", err)
	}
	if err := m.CheckSend(); !errors.Is(err, ErrFenced) {
		t.Fatalf("CheckSend after fencing: %v", err)
	}
	m = machineIn(t, InTransaction)
	m.Fail(AbortableBump, first)
	if !m.NeedBump() {
		t.Fatal("AbortableBump did not require a bump")
	}
}

// v1: a partition is sent to only once AddPartitionsToTxn added it to the
// current transaction; each wanted partition is asked for once.
func TestPartitionsV1(t *testing.T) {
	m := machineIn(t, InTransaction)
	a, b := TP{"t", 0}, TP{"t", 1}
	if ok, ask := m.SendAllowed(a); ok || !ask {
		t.Fatalf("first send to a: ok %v ask %v", ok, ask)
	}
	if ok, ask := m.SendAllowed(a); ok || ask {
		t.Fatalf("second send to a: ok %v ask %v", ok, ask)
	}
	m.SendAllowed(b)
	if m.Started() {
		t.Fatal("started before any add")
	}
	got := m.Wanted()
	if !slices.Equal(got, []TP{a, b}) {
		t.Fatalf("Wanted %v", got)
	}
	if again := m.Wanted(); len(again) != 0 {
		t.Fatalf("Wanted twice: %v", again)
	}
	m.Added(m.Seq(), []TP{a})
	if ok, _ := m.SendAllowed(a); !ok || !m.Started() {
		t.Fatalf("after the add: ok %v started %v", ok, m.Started())
	}
	if ok, _ := m.SendAllowed(b); ok {
		t.Fatal("b allowed while being added")
	}
	// Committing still sends (the flush), until the EndTxn goes.
	if err := m.BeginCommit(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := m.SendAllowed(a); !ok {
		t.Fatal("no sends while committing")
	}
	m.EndSent()
	if ok, _ := m.SendAllowed(a); ok {
		t.Fatal("sends after EndTxn")
	}
	m.Completed()
	if err := m.Begin(false); err != nil {
		t.Fatal(err)
	}
	// A new transaction holds no partitions; a late answer for the
	// old one adds nothing.
	m.Added(m.Seq()-1, []TP{b})
	if ok, ask := m.SendAllowed(a); ok || !ask {
		t.Fatalf("new transaction, a: ok %v ask %v", ok, ask)
	}
	if ok, _ := m.SendAllowed(b); ok {
		t.Fatal("a late add answer counted")
	}
}

// v2: every partition may be sent to; the transaction starts with the
// first batch sent.
func TestPartitionsV2(t *testing.T) {
	m := machineIn(t, Ready)
	if err := m.Begin(true); err != nil {
		t.Fatal(err)
	}
	tp := TP{"t", 3}
	if ok, ask := m.SendAllowed(tp); !ok || ask {
		t.Fatalf("v2 send: ok %v ask %v", ok, ask)
	}
	if m.Started() || len(m.Wanted()) != 0 {
		t.Fatal("v2 started or wanted without a write")
	}
	m.Wrote(tp)
	if !m.Started() || !slices.Equal(m.Partitions(), []TP{tp}) {
		t.Fatalf("after a write: started %v parts %v", m.Started(), m.Partitions())
	}
	if m.NeedAddOffsets("g") {
		t.Fatal("v2 asks for AddOffsetsToTxn")
	}
}

// Errors and aborts stop sends: an abort drops what was not sent.
func TestNoSendsInErrorOrAbort(t *testing.T) {
	for _, s := range []State{AbortableError, Aborting, FatalError, Ready} {
		m := machineIn(t, s)
		if ok, ask := m.SendAllowed(TP{"t", 0}); ok || ask {
			t.Errorf("%s: ok %v ask %v", s, ok, ask)
		}
	}
}

// Offsets under v1 need AddOffsetsToTxn once per group; they start the
// transaction.
func TestOffsetsV1(t *testing.T) {
	m := machineIn(t, InTransaction)
	if !m.NeedAddOffsets("g") {
		t.Fatal("v1 does not ask for AddOffsetsToTxn")
	}
	m.OffsetsAdded("g")
	if m.NeedAddOffsets("g") || !m.Started() {
		t.Fatal("group not recorded")
	}
	if !m.NeedAddOffsets("h") {
		t.Fatal("another group counted as added")
	}
}

// The gate changes when the transaction stops taking records and with
// every new transaction.
func TestGate(t *testing.T) {
	m := machineIn(t, Ready)
	g0 := m.Gate()
	if g0&1 != 0 {
		t.Fatal("gate open while ready")
	}
	m.Begin(false)
	g1 := m.Gate()
	if g1&1 != 1 {
		t.Fatal("gate closed in a transaction")
	}
	m.BeginCommit()
	if m.Gate() == g1 || m.Gate()&1 != 0 {
		t.Fatal("gate unchanged by commit")
	}
	m.Completed()
	m.Begin(false)
	if m.Gate() == g1 {
		t.Fatal("a new transaction has the old gate")
	}
}

// Completed clears what the transaction held, the stale epoch and the
// bump.
func TestCompletedClears(t *testing.T) {
	m := machineIn(t, InTransaction)
	m.MarkStale()
	m.Fail(AbortableBump, errCause)
	if !m.StaleEpoch() || !m.NeedBump() {
		t.Fatal("not marked")
	}
	if err := m.BeginAbort(); err != nil {
		t.Fatal(err)
	}
	m.Completed()
	if m.StaleEpoch() || m.NeedBump() || m.Err() != nil || m.Started() || m.State() != Ready {
		t.Fatalf("after Completed: %+v", m)
	}
}
