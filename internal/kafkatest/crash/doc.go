// Package crash runs Riffle against a real Apache Kafka cluster whose
// brokers crash and whose partitions move: SIGKILLed partition leaders
// restarted on the same storage, a controlled shutdown, a preferred leader
// election and a partition reassignment, while producers, consumer groups,
// exactly-once pipelines and share groups run. It has only tests, and they
// use only Riffle's public API (and riffle/process), with the harness of
// internal/kafkatest to start, kill and restart the nodes.
//
// The tests run when asked:
//
//	RIFFLE_KAFKA=4.4.0 go test -race ./internal/kafkatest/crash/
//
// starts a 3-node cluster of the pinned release for the package (it kills
// nodes, so it cannot share the integration suite's cluster, and
// RIFFLE_KAFKA_BROKERS does not apply: with it alone the tests skip, saying
// so). Without RIFFLE_KAFKA every test skips; RIFFLE_KAFKA_REQUIRE=1 turns
// the skips into failures, as CI does.
//
// Each scenario prints its accounting in one line starting with
// "accounting" (t.Logf; go test -v shows it). docs/real-kafka.md says what
// the scenarios check and what they found.
package crash
