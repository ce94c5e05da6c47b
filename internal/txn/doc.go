// Package txn is the pure core of the transactional producer: the state of
// the producer's transactions, the transitions the public calls may make,
// which partitions a transaction holds, and how each error code a broker
// answers moves the transaction (KIP-98, KIP-447, KIP-691, KIP-890). It does
// no I/O, starts no goroutines and reads no clock; the producer's shell
// (producer_txn.go, produce_txn.go and produce_txn_coord.go in package
// riffle) calls in under its own lock and acts on the answers.
//
// # States
//
// The states and their names are the Java client's TransactionManager's:
//
//	Uninitialized --Init--> Initializing --Initialized--> Ready
//	Ready --Begin--> InTransaction
//	InTransaction --BeginCommit--> Committing --Completed--> Ready
//	InTransaction, AbortableError --BeginAbort--> Aborting --Completed--> Ready
//	Committing (EndTxn not yet sent) --BeginAbort--> Aborting
//	InTransaction, Committing --Fail(abortable)--> AbortableError
//	any --Fail(fatal)--> FatalError (never left)
//
// Committing and Aborting may be entered again: a commit or abort whose
// context ended resumes where it stopped when called again. Once an EndTxn
// committing the transaction may have reached the coordinator, only a
// commit may finish it.
//
// # Partitions
//
// Under transactions v1 a partition must be added to the transaction
// (AddPartitionsToTxn) before its first batch is sent: SendAllowed says
// whether a batch may go and asks for the add; the shell collects Wanted
// partitions into one request and reports Added. Under v2 (KIP-890) the
// broker adds a partition when the first batch arrives; Wrote records it
// so that an empty transaction is never ended with an EndTxn.
//
// # Errors
//
// Classify maps a response code of each transactional request to an
// Action: retry, look the coordinator up again, abort the transaction
// (the producer lives on), or stop the producer (fatal; fenced when
// another producer took over the transactional id). Errors returned by
// the Machine wrap ErrAbortable, ErrFatal or ErrFenced, and ErrState for
// a call the current state does not allow.
package txn
