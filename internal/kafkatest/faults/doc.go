// Package faults is Riffle's fault suite against a real Apache Kafka
// cluster: its tests stop, kill and restart nodes, so it runs only on a
// 3-node cluster it starts itself, never on one given by
// RIFFLE_KAFKA_BROKERS (those tests skip, saying so). It has only tests,
// using only Riffle's public API and the harness (internal/kafkatest) to
// stop and start nodes.
//
//	RIFFLE_KAFKA=4.4.0 go test -race ./internal/kafkatest/faults/
//
// Without RIFFLE_KAFKA each test skips with a line saying how to run it;
// RIFFLE_KAFKA_REQUIRE=1 turns those skips into failures, as CI does. The
// tests run one at a time (each leaves every node running), about two
// minutes with the cluster's start. docs/real-kafka.md says what they
// found.
package faults
