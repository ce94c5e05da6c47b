package txn

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// State is where the producer's transactions stand.
type State uint8

// The states, named as the Java client names them.
const (
	Uninitialized State = iota
	Initializing
	Ready
	InTransaction
	Committing
	Aborting
	AbortableError
	FatalError
)

var stateNames = [...]string{"Uninitialized", "Initializing", "Ready", "InTransaction", "Committing", "Aborting", "AbortableError", "FatalError"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// classError is an error class: a sentinel that is never retriable (the
// request was retried already; what is left is for the caller to decide)
// and may belong to a wider class.
type classError struct {
	msg    string
	parent error
}

func (e *classError) Error() string        { return e.msg }
func (e *classError) Is(target error) bool { return e.parent != nil && target == e.parent }

// Retriable is false: the client's retry loops stop at once, and
// IsRetriable does not look through to the cause.
func (e *classError) Retriable() bool { return false }

// The error classes. The Machine's errors wrap one of them and the cause.
var (
	// ErrState: the call is not allowed in the current state (Java's
	// IllegalStateException): the message says what to call instead.
	ErrState = errors.New("riffle: invalid transaction state")
	// ErrAbortable: the transaction must be aborted; then the producer
	// can run the next one.
	ErrAbortable error = &classError{msg: "riffle: transaction must be aborted"}
	// ErrFatal: the producer can do nothing more but close.
	ErrFatal error = &classError{msg: "riffle: transactional producer failed"}
	// ErrFenced: fatal (it matches ErrFatal); another producer with
	// the same transactional id took over.
	ErrFenced error = &classError{msg: "riffle: producer fenced", parent: ErrFatal}
	// ErrAborted: the record was not written because its transaction
	// was aborted.
	ErrAborted = errors.New("riffle: transaction aborted")
)

// Wrap returns cause wrapped in the class of action (abortable, fatal or
// fenced); other actions return cause. A cause already of the class is
// returned as it is.
func Wrap(a Action, cause error) error {
	var class error
	switch a {
	case Abortable, AbortableBump:
		class = ErrAbortable
	case Fatal:
		class = ErrFatal
	case Fenced:
		class = ErrFenced
	default:
		return cause
	}
	if errors.Is(cause, class) {
		return cause
	}
	return fmt.Errorf("%w: %w", class, cause)
}

func stateErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrState}, args...)...)
}

// TP names a partition.
type TP struct {
	Topic     string
	Partition int32
}

func (tp TP) String() string { return fmt.Sprintf("%s[%d]", tp.Topic, tp.Partition) }

type partStatus uint8

const (
	wanted partStatus = iota + 1 // a batch waits; not yet asked for
	adding                       // in an AddPartitionsToTxn not yet answered
	added                        // in the transaction
)

// Machine is the transactional state of one producer. Not safe for
// concurrent use: the producer guards it with a mutex.
type Machine struct {
	state State
	err   error // the error of AbortableError or FatalError
	v2    bool  // this transaction uses KIP-890 (implicit adds, epoch bump per transaction)
	seq   uint64

	parts   map[TP]partStatus
	groups  map[string]bool // v1: groups added with AddOffsetsToTxn
	started bool            // the coordinator may know of the transaction
	endSent bool            // an EndTxn of the current commit or abort may have reached the coordinator
	// stale: a partition leader answered INVALID_PRODUCER_EPOCH: the
	// coordinator bumped the epoch past ours, which it does only when it
	// aborts our transaction itself (a timeout) or hands the
	// transactional id to a new producer.
	stale    bool
	needBump bool // sequences of this epoch are broken: the next transaction needs a new epoch
}

// State returns the current state.
func (m *Machine) State() State { return m.state }

// Err returns the error of an error state, nil otherwise.
func (m *Machine) Err() error { return m.err }

// V2 reports whether the current (or last) transaction uses KIP-890.
func (m *Machine) V2() bool { return m.v2 }

// Seq returns the number of the current (or last) transaction; Begin
// increments it.
func (m *Machine) Seq() uint64 { return m.seq }

// Gate packs the transaction number and whether it takes records (state
// InTransaction), so that the shell can admit records with one atomic
// load and notice, after admitting one, that the transaction moved on.
func (m *Machine) Gate() uint64 {
	g := m.seq << 1
	if m.state == InTransaction {
		g |= 1
	}
	return g
}

// Started reports whether the coordinator may know of the transaction: a
// partition or a group was added (v1), or a batch or an offset commit was
// sent (v2). An EndTxn for a transaction it does not know fails, so one
// that never started is completed without it.
func (m *Machine) Started() bool { return m.started }

// StaleEpoch reports whether a partition leader said the coordinator
// bumped the epoch past this producer's (see Fail).
func (m *Machine) StaleEpoch() bool { return m.stale }

// NeedBump reports whether the producer needs a new epoch before its next
// transaction: sequence numbers of the current one are broken (a batch
// that may have taken its numbers was dropped, or the coordinator lost
// the producer's state).
func (m *Machine) NeedBump() bool { return m.needBump }

// RequireBump records that sequences are broken (see NeedBump).
func (m *Machine) RequireBump() { m.needBump = true }

// Init starts InitTransactions; calling it again while initializing
// resumes.
func (m *Machine) Init() error {
	switch m.state {
	case Uninitialized, Initializing:
		m.state = Initializing
		return nil
	case FatalError:
		return m.err
	}
	return stateErr("transactions are already initialized")
}

// Initialized ends InitTransactions: the producer has its id and epoch.
func (m *Machine) Initialized() {
	if m.state == Initializing {
		m.state = Ready
	}
}

// Begin opens a transaction; v2 says whether it uses KIP-890.
func (m *Machine) Begin(v2 bool) error {
	switch m.state {
	case Ready:
		m.state = InTransaction
		m.seq++
		m.v2 = v2
		m.parts = map[TP]partStatus{}
		m.groups = map[string]bool{}
		m.started, m.endSent = false, false
		return nil
	case Uninitialized, Initializing:
		return stateErr("call InitTransactions before BeginTransaction")
	case InTransaction:
		return stateErr("a transaction is already open")
	case Committing, Aborting:
		return stateErr("the previous transaction is still %s: call %s again", verb(m.state), call(m.state))
	}
	return m.err
}

func verb(s State) string {
	if s == Committing {
		return "being committed"
	}
	return "being aborted"
}

func call(s State) string {
	if s == Committing {
		return "CommitTransaction"
	}
	return "AbortTransaction"
}

// CheckSend admits a record: nil only in a transaction that takes records.
func (m *Machine) CheckSend() error {
	switch m.state {
	case InTransaction:
		return nil
	case Uninitialized, Initializing:
		return stateErr("produce outside a transaction: call InitTransactions, then BeginTransaction")
	case Ready:
		return stateErr("produce outside a transaction: call BeginTransaction first")
	case Committing, Aborting:
		return stateErr("produce while the transaction is %s", verb(m.state))
	}
	return m.err
}

// Sending reports whether batches of the transaction may be sent: while
// it is open and while its commit flushes them (an abort drops them).
func (m *Machine) Sending() bool { return m.sending() }

func (m *Machine) sending() bool {
	return m.state == InTransaction || m.state == Committing && !m.endSent
}

// SendAllowed reports whether a batch of tp may be sent now. Under v1 a
// partition that is not yet in the transaction may not; it is then
// recorded as wanted, and ask says that it was newly so (the shell wakes
// whoever sends AddPartitionsToTxn).
func (m *Machine) SendAllowed(tp TP) (ok, ask bool) {
	if !m.sending() {
		return false, false
	}
	if m.v2 {
		return true, false
	}
	switch m.parts[tp] {
	case added:
		return true, false
	case 0:
		m.parts[tp] = wanted
		return false, true
	}
	return false, false
}

// Wanted returns the partitions waiting to be added, sorted, and marks
// them as being added. None while batches may not be sent.
func (m *Machine) Wanted() []TP {
	if !m.sending() || m.v2 {
		return nil
	}
	var out []TP
	for tp, st := range m.parts {
		if st == wanted {
			m.parts[tp] = adding
			out = append(out, tp)
		}
	}
	slices.SortFunc(out, func(a, b TP) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// Added records partitions the coordinator added to transaction seq (the
// answer may come after that transaction ended: it is then ignored).
func (m *Machine) Added(seq uint64, tps []TP) {
	if seq != m.seq || m.parts == nil {
		return
	}
	for _, tp := range tps {
		if m.parts[tp] == adding {
			m.parts[tp] = added
			m.started = true
		}
	}
}

// Wrote records (v2) that a batch of tp was sent: the broker adds the
// partition to the transaction when it arrives.
func (m *Machine) Wrote(tp TP) {
	if m.sending() && m.v2 {
		m.parts[tp] = added
		m.started = true
	}
}

// Partitions returns the partitions in the transaction, sorted.
func (m *Machine) Partitions() []TP {
	var out []TP
	for tp, st := range m.parts {
		if st == added {
			out = append(out, tp)
		}
	}
	slices.SortFunc(out, func(a, b TP) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// CheckOffsets admits SendOffsetsToTransaction: only in an open
// transaction.
func (m *Machine) CheckOffsets() error {
	switch m.state {
	case InTransaction:
		return nil
	case AbortableError, FatalError:
		return m.err
	}
	return stateErr("SendOffsetsToTransaction outside an open transaction (state %s)", m.state)
}

// NeedAddOffsets reports (v1) whether group must be added to the
// transaction with AddOffsetsToTxn before its offsets are committed in it.
// Under v2 TxnOffsetCommit adds the group itself.
func (m *Machine) NeedAddOffsets(group string) bool { return !m.v2 && !m.groups[group] }

// OffsetsAdded records that group was added (v1) or that offsets of group
// were sent in a TxnOffsetCommit (v2).
func (m *Machine) OffsetsAdded(group string) {
	if m.state == InTransaction {
		m.groups[group] = true
		m.started = true
	}
}

// BeginCommit starts (or resumes) committing the transaction.
func (m *Machine) BeginCommit() error {
	switch m.state {
	case InTransaction:
		m.state = Committing
		m.endSent = false
		return nil
	case Committing:
		return nil
	case AbortableError, FatalError:
		return m.err
	case Aborting:
		return stateErr("the transaction is being aborted: call AbortTransaction again")
	}
	return stateErr("no transaction to commit (state %s): call BeginTransaction first", m.state)
}

// BeginAbort starts (or resumes) aborting the transaction. A commit whose
// EndTxn may have reached the coordinator cannot be aborted any more.
func (m *Machine) BeginAbort() error {
	switch m.state {
	case InTransaction, AbortableError:
		m.state = Aborting
		m.endSent = false
		return nil
	case Aborting:
		return nil
	case Committing:
		if m.endSent {
			return stateErr("the commit may have reached the coordinator: call CommitTransaction again")
		}
		m.state = Aborting
		return nil
	case FatalError:
		return m.err
	}
	return stateErr("no transaction to abort (state %s)", m.state)
}

// EndSent records that the EndTxn of the current commit or abort is on its
// way: from now on a commit can only be finished by committing.
func (m *Machine) EndSent() {
	if m.state == Committing || m.state == Aborting {
		m.endSent = true
	}
}

// Completed ends a commit or abort: the producer is ready for the next
// transaction, with sequences intact (a bump, if one was needed, is done).
func (m *Machine) Completed() {
	if m.state != Committing && m.state != Aborting {
		return
	}
	m.state = Ready
	m.err = nil
	m.parts, m.groups = nil, nil
	m.started, m.endSent = false, false
	m.stale, m.needBump = false, false
}

// Fail applies an error the producer met with action a (see Classify) and
// returns the error the caller reports: cause wrapped in its class, or
// the error that already stopped the producer.
//
// An abortable error moves an open or committing transaction to
// AbortableError (the first cause is kept); one met while aborting leaves
// the abort going. A fatal one is final. INVALID_PRODUCER_EPOCH from a
// record (op Produce) also marks the epoch stale.
func (m *Machine) Fail(a Action, cause error) error {
	if m.state == FatalError {
		return m.err
	}
	err := Wrap(a, cause)
	switch a {
	case Fatal, Fenced:
		m.state, m.err = FatalError, err
		return err
	case AbortableBump:
		m.needBump = true
	case Abortable:
	default:
		return cause
	}
	switch m.state {
	case InTransaction, Committing:
		m.state, m.err = AbortableError, err
	case AbortableError:
		return m.err
	}
	return err
}

// MarkStale records that a partition leader answered
// INVALID_PRODUCER_EPOCH for a record of the transaction (see StaleEpoch).
func (m *Machine) MarkStale() {
	if m.state != Ready && m.state != Uninitialized && m.state != Initializing {
		m.stale = true
	}
}
