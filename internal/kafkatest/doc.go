// Package kafkatest runs a real Apache Kafka cluster for Riffle's
// integration suite: the broker of the version pinned in pom.xml
// ([Version]), or Kafka 3.9 ([Version39], pom-3.9.xml; [Config.Version]),
// from its Maven Central jars, with no Docker and no tarball.
//
// [Libs] ([LibsFor] a version) resolves the jars once with mvn into a
// cache outside the repository ([CacheDir], per version) and reuses them. [Start] formats and starts 1 or
// 3 combined broker+controller KRaft nodes on loopback, in a temporary
// directory (under /dev/shm when there is one), on free ports, each in a
// rack of its own (r1, r2, r3) with the rack-aware replica selector, and
// with the settings that keep tests fast written out explicitly (no initial
// rebalance delay, 4 partitions per internal topic, short group heartbeat,
// session and share-lock minimums). It returns once each node, asked on its
// own listener, lists every node in Metadata.
//
// Every JVM runs in a process group of its own and, on Linux, dies with the
// process that started it (PR_SET_PDEATHSIG), so a test binary that panics or
// times out leaves no broker behind. [Cluster.Kill] (SIGKILL),
// [Cluster.Stop] (SIGTERM, a controlled shutdown) and [Cluster.Restart] are
// for fault tests; [Cluster.Close] stops everything and removes the
// directory.
//
// By hand, go run ./internal/kafkatest/cmd/kafka -nodes 3 prints the
// bootstrap addresses and runs until Ctrl-C. The suites that use the
// harness are ./integration (one cluster shared by its tests) and ./crash
// (a cluster of its own, whose nodes it kills, stops and restarts).
package kafkatest
