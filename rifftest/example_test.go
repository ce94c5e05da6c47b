package rifftest_test

import (
	"crypto/tls"
	"fmt"
	"log"
	"testing"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/rifftest"
)

// A test gets a cluster that closes itself when the test ends, and points
// the client under test at its addresses.
func ExampleNew() {
	testOrders := func(t *testing.T) {
		c := rifftest.New(t, rifftest.Brokers(3), rifftest.Topic("orders", 6))
		cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		// ... produce to and consume "orders" through cl
	}
	_ = testOrders
}

// Outside a test, Start the cluster and Close it yourself.
func ExampleStart() {
	c, err := rifftest.Start(rifftest.Brokers(3), rifftest.Topic("orders", 6))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	fmt.Println(len(c.Addrs()), "brokers")
	// Output: 3 brokers
}

// SelfSignedTLS clusters hand out client configs that trust them.
func ExampleCluster_ClientTLS() {
	c, err := rifftest.Start(rifftest.SelfSignedTLS())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	conn, err := tls.Dial("tcp", c.Addrs()[0], c.ClientTLS())
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	fmt.Println("verified:", conn.ConnectionState().HandshakeComplete)
	// Output: verified: true
}

// With RequireClientCert, clients need a certificate from the cluster's CA.
func ExampleCluster_ClientCert() {
	c, err := rifftest.Start(rifftest.SelfSignedTLS(), rifftest.RequireClientCert())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	cert, err := c.ClientCert("alice")
	if err != nil {
		log.Fatal(err)
	}
	cfg := c.ClientTLS()
	cfg.Certificates = []tls.Certificate{cert}
	conn, err := tls.Dial("tcp", c.Addrs()[0], cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	fmt.Println("client:", cert.Leaf.Subject.CommonName)
	// Output: client: alice
}

// Kfake exposes kfake for changing the cluster under a running client.
func ExampleCluster_Kfake() {
	c, err := rifftest.Start(rifftest.Brokers(2), rifftest.Topic("orders", 1))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	kc := c.Kfake()
	if err := kc.MoveTopicPartition("orders", 0, 1); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders/0 leader:", kc.LeaderFor("orders", 0))
	// Output: orders/0 leader: 1
}
