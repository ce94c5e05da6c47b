package rifftest_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/riffle-go/riffle/rifftest"
)

func TestBrokersAndTopics(t *testing.T) {
	c := rifftest.New(t, rifftest.Brokers(3), rifftest.Topic("orders", 6), rifftest.Topic("audit", 1))

	addrs := c.Addrs()
	if len(addrs) != 3 {
		t.Fatalf("Addrs() = %v, want 3 addresses", addrs)
	}
	ports := make(map[int32]bool)
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("address %q is not 127.0.0.1:port (err %v)", a, err)
		}
		p, _ := strconv.Atoi(port)
		ports[int32(p)] = true
	}
	if len(ports) != 3 {
		t.Fatalf("Addrs() = %v, want 3 distinct ports", addrs)
	}

	// Every broker must describe the same cluster; ask each one.
	for _, addr := range addrs {
		resp, err := dialWire(t, addr).metadata()
		if err != nil {
			t.Fatalf("metadata from %s: %v", addr, err)
		}
		if len(resp.Brokers) != 3 {
			t.Fatalf("%s reports %d brokers, want 3", addr, len(resp.Brokers))
		}
		nodes := make(map[int32]bool)
		for _, b := range resp.Brokers {
			if !ports[b.Port] || b.Host != "127.0.0.1" {
				t.Errorf("%s reports broker %d at %s:%d, not one of %v", addr, b.NodeID, b.Host, b.Port, addrs)
			}
			nodes[b.NodeID] = true
		}
		want := map[string]int{"orders": 6, "audit": 1}
		got := make(map[string]int)
		for _, tp := range resp.Topics {
			if tp.ErrorCode != 0 {
				t.Errorf("%s: topic %v error %v", addr, tp.Topic, kerr.ErrorForCode(tp.ErrorCode))
			}
			got[*tp.Topic] = len(tp.Partitions)
			for _, p := range tp.Partitions {
				if !nodes[p.Leader] {
					t.Errorf("%s: %s/%d led by unknown broker %d", addr, *tp.Topic, p.Partition, p.Leader)
				}
			}
		}
		if len(got) != len(want) || got["orders"] != want["orders"] || got["audit"] != want["audit"] {
			t.Errorf("%s reports topics %v, want %v", addr, got, want)
		}
	}
}

func TestDefaultIsOneBrokerNoTopics(t *testing.T) {
	c := rifftest.New(t)
	addrs := c.Addrs()
	if len(addrs) != 1 {
		t.Fatalf("Addrs() = %v, want 1 address", addrs)
	}
	resp, err := dialWire(t, addrs[0]).metadata()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 1 || len(resp.Topics) != 0 {
		t.Fatalf("got %d brokers and %d topics, want 1 and 0", len(resp.Brokers), len(resp.Topics))
	}
}

// autoCreate asks for topic with auto-creation allowed and returns its error
// code and partition count.
func autoCreate(t *testing.T, c *rifftest.Cluster, topic string) (int16, int) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = true
	resp := kmsg.NewPtrMetadataResponse()
	if err := dialWire(t, c.Addrs()[0]).roundTrip(req, resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 {
		t.Fatalf("got %d topics, want 1", len(resp.Topics))
	}
	return resp.Topics[0].ErrorCode, len(resp.Topics[0].Partitions)
}

func TestAutoCreateTopics(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		c := rifftest.New(t)
		if code, _ := autoCreate(t, c, "fresh"); code != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("error %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
		}
	})
	t.Run("on", func(t *testing.T) {
		c := rifftest.New(t, rifftest.AutoCreateTopics(), rifftest.KfakeOption(kfake.DefaultNumPartitions(4)))
		if code, n := autoCreate(t, c, "fresh"); code != 0 || n != 4 {
			t.Fatalf("error %v with %d partitions, want success with 4", kerr.ErrorForCode(code), n)
		}
	})
}

func TestSASLPlain(t *testing.T) {
	c := rifftest.New(t,
		rifftest.SASL("PLAIN", "alice", "secret"),
		rifftest.SASL("PLAIN", "carol", "other"),
		rifftest.SASL("SCRAM-SHA-256", "bob", "scram"),
	)
	addr := c.Addrs()[0]

	t.Run("right password", func(t *testing.T) {
		for _, u := range [][2]string{{"alice", "secret"}, {"carol", "other"}} {
			w := dialWire(t, addr)
			if err := w.saslPlain(u[0], u[1]); err != nil {
				t.Fatalf("%s: %v", u[0], err)
			}
			// Authenticating must unlock the connection.
			if _, err := w.metadata(); err != nil {
				t.Fatalf("%s: metadata after authenticating: %v", u[0], err)
			}
		}
	})
	// kfake hangs up on a failed authentication instead of answering
	// SASL_AUTHENTICATION_FAILED as Kafka does; either is a failure.
	t.Run("wrong password", func(t *testing.T) {
		if err := dialWire(t, addr).saslPlain("alice", "guess"); err == nil {
			t.Fatal("authenticated with the wrong password")
		}
	})
	t.Run("another user's password", func(t *testing.T) {
		if err := dialWire(t, addr).saslPlain("alice", "other"); err == nil {
			t.Fatal("authenticated alice with carol's password")
		}
	})
	// A SCRAM user is not a PLAIN user: mechanisms must not bleed.
	t.Run("wrong mechanism", func(t *testing.T) {
		if err := dialWire(t, addr).saslPlain("bob", "scram"); err == nil {
			t.Fatal("authenticated a SCRAM-only user with PLAIN")
		}
	})
	t.Run("unauthenticated", func(t *testing.T) {
		if _, err := dialWire(t, addr).metadata(); err == nil {
			t.Fatal("metadata answered without authentication")
		}
	})
}

func TestSelfSignedTLS(t *testing.T) {
	c := rifftest.New(t, rifftest.SelfSignedTLS(), rifftest.Topic("secure", 2))
	addr := c.Addrs()[0]
	_, port, _ := net.SplitHostPort(addr)

	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run("trusted "+host, func(t *testing.T) {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(host, port), c.ClientTLS())
			if err != nil {
				t.Fatalf("TLS dial: %v", err)
			}
			resp, err := newWire(t, conn).metadata()
			if err != nil {
				t.Fatalf("metadata over TLS: %v", err)
			}
			if len(resp.Topics) != 1 {
				t.Fatalf("got %d topics over TLS, want 1", len(resp.Topics))
			}
		})
	}

	t.Run("untrusted", func(t *testing.T) {
		// The system roots cannot know a CA minted a moment ago.
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{MinVersion: tls.VersionTLS12})
		if err == nil {
			conn.Close()
			t.Fatal("TLS dial succeeded without trusting the cluster's CA")
		}
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Fatalf("error %v, want an unknown authority error", err)
		}
	})

	t.Run("plaintext refused", func(t *testing.T) {
		if _, err := dialWire(t, addr).metadata(); err == nil {
			t.Fatal("a TLS broker answered a plaintext request")
		}
	})

	t.Run("CA PEM", func(t *testing.T) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(c.CACertPEM()) {
			t.Fatal("CACertPEM does not parse")
		}
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("TLS dial trusting CACertPEM: %v", err)
		}
		conn.Close()
	})
}

func TestNoTLSHelpersWithoutSelfSignedTLS(t *testing.T) {
	c := rifftest.New(t)
	if c.ClientTLS() != nil || c.CACertPEM() != nil {
		t.Fatal("TLS helpers return material for a plaintext cluster")
	}
	if _, err := c.ClientCert("x"); err == nil {
		t.Fatal("ClientCert succeeded on a plaintext cluster")
	}
}

// tlsMetadata completes a TLS handshake and one request, which is where a
// rejected client certificate shows up: under TLS 1.3 the client finishes
// its side of the handshake before the server has judged its certificate.
func tlsMetadata(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	_, err = newWire(t, conn).metadata()
	return err
}

func TestRequireClientCert(t *testing.T) {
	c := rifftest.New(t, rifftest.SelfSignedTLS(), rifftest.RequireClientCert())
	addr := c.Addrs()[0]

	t.Run("no certificate", func(t *testing.T) {
		err := tlsMetadata(t, addr, c.ClientTLS())
		if err == nil {
			t.Fatal("mutual TLS cluster answered a client without a certificate")
		}
		if !strings.Contains(err.Error(), "certificate required") {
			t.Fatalf("error %v, want the server's certificate required alert", err)
		}
	})

	t.Run("certificate from the cluster's CA", func(t *testing.T) {
		cert, err := c.ClientCert("alice")
		if err != nil {
			t.Fatal(err)
		}
		if cert.Leaf.Subject.CommonName != "alice" {
			t.Fatalf("common name %q, want alice", cert.Leaf.Subject.CommonName)
		}
		cfg := c.ClientTLS()
		cfg.Certificates = []tls.Certificate{cert}
		if err := tlsMetadata(t, addr, cfg); err != nil {
			t.Fatalf("mutual TLS with a CA-signed certificate: %v", err)
		}
	})

	t.Run("certificate from another CA", func(t *testing.T) {
		other := rifftest.New(t, rifftest.SelfSignedTLS())
		cert, err := other.ClientCert("mallory")
		if err != nil {
			t.Fatal(err)
		}
		cfg := c.ClientTLS()
		cfg.Certificates = []tls.Certificate{cert}
		if err := tlsMetadata(t, addr, cfg); err == nil {
			t.Fatal("mutual TLS cluster accepted a certificate from a foreign CA")
		}
	})
}

// selfSigned makes a certificate for 127.0.0.1 that is its own CA, the way
// a user of the TLS option might bring one.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

func TestTLSWithOwnConfig(t *testing.T) {
	cert, pool := selfSigned(t)
	srv := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	c := rifftest.New(t, rifftest.TLS(srv))
	// The option clones: clearing the caller's config afterwards must
	// not break the running brokers.
	srv.Certificates = nil

	if c.ClientTLS() != nil {
		t.Error("ClientTLS is non-nil for a cluster with a caller-provided TLS config")
	}
	if err := tlsMetadata(t, c.Addrs()[0], &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}); err != nil {
		t.Fatalf("metadata over caller-configured TLS: %v", err)
	}
}

func TestBrokerConfig(t *testing.T) {
	c := rifftest.New(t, rifftest.BrokerConfig("message.max.bytes", "12345"))
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeBroker
	res.ResourceName = "0"
	res.ConfigNames = []string{"message.max.bytes"}
	req.Resources = append(req.Resources, res)
	resp := kmsg.NewPtrDescribeConfigsResponse()
	if err := dialWire(t, c.Addrs()[0]).roundTrip(req, resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 || len(resp.Resources[0].Configs) != 1 {
		t.Fatalf("unexpected DescribeConfigs response %+v", resp.Resources)
	}
	if v := resp.Resources[0].Configs[0].Value; v == nil || *v != "12345" {
		t.Fatalf("message.max.bytes = %v, want 12345", v)
	}
}

func TestKfakeOptionWins(t *testing.T) {
	c := rifftest.New(t, rifftest.Brokers(1), rifftest.KfakeOption(kfake.NumBrokers(2), kfake.ClusterID("riffle-test")))
	if n := len(c.Addrs()); n != 2 {
		t.Fatalf("%d brokers, want kfake.NumBrokers(2) to override Brokers(1)", n)
	}
	resp, err := dialWire(t, c.Addrs()[0]).metadata()
	if err != nil {
		t.Fatal(err)
	}
	if resp.ClusterID == nil || *resp.ClusterID != "riffle-test" {
		t.Fatalf("cluster ID %v, want riffle-test", resp.ClusterID)
	}
}

func TestKfakeEscapeHatch(t *testing.T) {
	c := rifftest.New(t, rifftest.Brokers(2), rifftest.Topic("t", 1))
	kc := c.Kfake()

	// Move the partition to whichever broker does not lead it, and the
	// brokers must say so.
	to := 1 - kc.LeaderFor("t", 0)
	if err := kc.MoveTopicPartition("t", 0, to); err != nil {
		t.Fatal(err)
	}
	resp, err := dialWire(t, c.Addrs()[0]).metadata()
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0].Partitions[0].Leader; got != to {
		t.Fatalf("leader %d after moving to %d", got, to)
	}

	// Addrs follows membership changes made behind rifftest's back.
	if _, _, err := kc.AddNode(-1, 0); err != nil {
		t.Fatal(err)
	}
	if n := len(c.Addrs()); n != 3 {
		t.Fatalf("%d addresses after AddNode, want 3", n)
	}
}

// refused reports whether a dial to addr is refused outright, which is what
// a closed loopback port does.
func refused(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		conn.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func TestNewClosesOnCleanup(t *testing.T) {
	var addrs []string
	t.Run("sub", func(t *testing.T) {
		c := rifftest.New(t, rifftest.Brokers(2))
		addrs = c.Addrs()
		for _, a := range addrs {
			if refused(a) {
				t.Fatalf("%s refused while the cluster runs", a)
			}
		}
	})
	for _, a := range addrs {
		if !refused(a) {
			t.Errorf("%s still accepts connections after the subtest that created it ended", a)
		}
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	c, err := rifftest.Start(rifftest.Brokers(2))
	if err != nil {
		t.Fatal(err)
	}
	before := c.Addrs()
	c.Close()
	c.Close()
	after := c.Addrs()
	if !slices.Equal(before, after) {
		t.Fatalf("Addrs() after Close = %v, want %v", after, before)
	}
	for _, a := range after {
		if !refused(a) {
			t.Errorf("%s still accepts connections after Close", a)
		}
	}
}

func TestCloseDropsConnections(t *testing.T) {
	c, err := rifftest.Start()
	if err != nil {
		t.Fatal(err)
	}
	w := dialWire(t, c.Addrs()[0])
	if _, err := w.metadata(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := w.metadata(); err == nil {
		t.Fatal("an open connection was still answered after Close")
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	for name, opts := range map[string][]rifftest.Option{
		"zero brokers":          {rifftest.Brokers(0)},
		"empty topic":           {rifftest.Topic("", 1)},
		"zero partitions":       {rifftest.Topic("t", 0)},
		"unknown mechanism":     {rifftest.SASL("GSSAPI", "u", "p")},
		"empty SASL user":       {rifftest.SASL("PLAIN", "", "p")},
		"nil TLS":               {rifftest.TLS(nil)},
		"two TLS sources":       {rifftest.TLS(&tls.Config{}), rifftest.SelfSignedTLS()},
		"client cert alone":     {rifftest.RequireClientCert()},
		"client cert with TLS":  {rifftest.TLS(&tls.Config{}), rifftest.RequireClientCert()},
		"empty broker config":   {rifftest.BrokerConfig("", "v")},
		"kfake rejects options": {rifftest.KfakeOption(kfake.Superuser("KERBEROS", "u", "p"))},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := rifftest.Start(opts...)
			if err == nil {
				c.Close()
				t.Fatal("Start succeeded")
			}
			if !strings.HasPrefix(err.Error(), "rifftest: ") {
				t.Errorf("error %q does not say where it came from", err)
			}
		})
	}
}

// TestAddrsDuringClose runs Addrs against Close under the race detector:
// Addrs on a kfake cluster that closed underneath it would block forever.
func TestAddrsDuringClose(t *testing.T) {
	c, err := rifftest.Start(rifftest.Brokers(2))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			if n := len(c.Addrs()); n != 2 {
				t.Errorf("Addrs() has %d addresses, want 2", n)
				return
			}
		}
	}()
	c.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Addrs blocked across Close")
	}
}
