// Package interop holds tests that run Riffle beside another Kafka client
// in one group or on one topic, against an embedded kfake cluster: the
// handovers where a difference in semantics would lose or repeat a record.
// It is a module of its own so that the library's go.mod requires no peer
// client (the peers are test dependencies here, as in bench/).
//
// Run it with the README's test command, or alone:
//
//	go test -race ./interop/...
package interop
