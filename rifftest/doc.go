// Package rifftest runs an embedded, in-process Kafka cluster for tests.
//
// Riffle's own tests, its CLI demo and the tests of programs built on Riffle
// all need a broker to talk to, and a real Kafka (or a container of one) is
// slow to start, needs Docker or a JVM, and cannot be made to misbehave on
// cue. rifftest wraps [kfake], franz-go's fake cluster, which speaks the
// Kafka wire protocol on real loopback TCP ports: a client under test goes
// through exactly the dialing, framing, TLS and SASL code it uses in
// production, while the test decides the topology and can inject faults.
//
// In a test, [New] starts a cluster and closes it when the test ends:
//
//	c := rifftest.New(t, rifftest.Brokers(3), rifftest.Topic("orders", 6))
//	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...))
//	if err != nil {
//		t.Fatal(err)
//	}
//	defer cl.Close()
//
// Outside a test (the CLI demo, a benchmark harness) use [Start] and call
// [Cluster.Close] yourself.
//
// Options cover what most tests need: broker count, seeded topics,
// auto-creation, SASL users, TLS (bring your own config or let
// [SelfSignedTLS] mint a throwaway CA), and broker configs. Anything else
// kfake can do is reachable through [KfakeOption] at start time and through
// [Cluster.Kfake] afterwards, for fault injection (Fault, ControlKey),
// partition moves and adding or removing brokers mid-test.
//
// [Blackhole] is unrelated to kfake but lives here for the same audience: it
// is an address whose TCP handshake never completes, for testing dial
// timeouts and unreachable-broker handling without relying on a routable
// but firewalled IP, which behaves differently from machine to machine.
package rifftest
