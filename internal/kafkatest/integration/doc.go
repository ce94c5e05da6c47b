// Package integration is Riffle's integration suite against a real Apache
// Kafka cluster. It has only tests, and they use only Riffle's public API,
// as an application would.
//
// The tests run when asked:
//
//	RIFFLE_KAFKA=4.4.0 go test -race ./internal/kafkatest/integration/
//
// starts a 3-node cluster of the pinned release (internal/kafkatest: java
// 17+ and mvn, jars cached outside the repository) shared by every test
// through TestMain, and
//
//	RIFFLE_KAFKA_BROKERS=127.0.0.1:9092 go test ./internal/kafkatest/integration/
//
// uses a running cluster instead (e.g. go run ./internal/kafkatest/cmd/kafka
// -nodes 3). Otherwise each test skips with a line saying this;
// RIFFLE_KAFKA_REQUIRE=1 turns those skips into failures, as CI does.
//
// Each test makes its own topics (unique names; replication factor 3 and
// min.insync.replicas 2 on a 3-node cluster), groups and transactional ids,
// so tests run in parallel on one cluster. docs/real-kafka.md lists where
// the real broker behaves differently from kfake, the in-process fake the
// rest of the tests run against.
//
// The suite lives under internal/kafkatest, beside the harness it needs,
// rather than in the root package: it must not reach unexported names,
// and it is not part of the module's API.
package integration
