package conn

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/sasl"
	"github.com/riffle-go/riffle/internal/wire"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// newKfake starts a one-broker kfake cluster with topic "t" (3 partitions)
// and returns its address.
func newKfake(t *testing.T, opts ...kfake.Opt) string {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(3, "t")}, opts...)
	cl, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	// ListenAddrs is answered by the cluster's run loop: ask before Close.
	addrs := cl.ListenAddrs()
	t.Cleanup(cl.Close)
	if len(addrs) != 1 {
		t.Fatalf("kfake listens on %v, want one address", addrs)
	}
	return addrs[0]
}

// checkMetadataT checks a Metadata response for topic "t" from a
// one-broker kfake cluster.
func checkMetadataT(t *testing.T, resp kmsg.Response) {
	t.Helper()
	md, ok := resp.(*kmsg.MetadataResponse)
	if !ok {
		t.Fatalf("response is %T, want *kmsg.MetadataResponse", resp)
	}
	if len(md.Brokers) != 1 {
		t.Errorf("metadata lists %d brokers, want 1", len(md.Brokers))
	}
	if len(md.Topics) != 1 || md.Topics[0].Topic == nil || *md.Topics[0].Topic != "t" {
		t.Fatalf("metadata topics = %+v, want just t", md.Topics)
	}
	if tp := md.Topics[0]; tp.ErrorCode != 0 || len(tp.Partitions) != 3 {
		t.Errorf("topic t: error %d, %d partitions; want 0 and 3", tp.ErrorCode, len(tp.Partitions))
	}
}

func TestKfakeDialNegotiatesAndServesMetadata(t *testing.T) {
	addr := newKfake(t)
	c := mustDial(t, testConfig(), addr)

	if c.Addr() != addr || c.NodeID() != 1 {
		t.Errorf("Addr, NodeID = %q, %d; want %q, 1", c.Addr(), c.NodeID(), addr)
	}
	md, ok := c.Versions().Max(3, kmsg.NewPtrMetadataRequest().MaxVersion())
	if !ok || md <= 0 {
		t.Errorf("negotiated Metadata v%d (ok %v), want > 0", md, ok)
	}
	if av, ok := c.Versions().Max(18, kmsg.NewPtrApiVersionsRequest().MaxVersion()); !ok || av < 3 {
		t.Errorf("negotiated ApiVersions v%d (ok %v), want >= 3", av, ok)
	}
	if v, ok := c.Versions().Max(0, 100); !ok || v < 3 {
		t.Errorf("Produce max v%d (ok %v): a kfake broker supports Produce v3+", v, ok)
	}
	if _, ok := c.Versions().Max(127, 10); ok {
		t.Error("an API key the broker never listed is reported as supported")
	}

	ctx := context.Background()
	resp, err := c.Request(ctx, metadataReq("t"))
	if err != nil {
		t.Fatalf("Metadata: %v", err)
	}
	checkMetadataT(t, resp)
	if got := resp.GetVersion(); got != md {
		t.Errorf("response decoded at v%d, request negotiated v%d", got, md)
	}
	if n := c.Inflight(); n != 0 {
		t.Errorf("Inflight after the response = %d, want 0", n)
	}
	if time.Since(c.LastUsed()) > 5*time.Second {
		t.Errorf("LastUsed = %v, not updated by the request", c.LastUsed())
	}
	if c.Err() != nil {
		t.Errorf("Err() on an open connection = %v", c.Err())
	}
}

// TestKfakeConcurrentRequests issues many requests at once on one Conn. Each
// asks about topic names of its own, so a response delivered to the wrong
// caller is caught; a sampler checks the pipelining cap is never exceeded.
func TestKfakeConcurrentRequests(t *testing.T) {
	addr := newKfake(t)
	cfg := testConfig()
	cfg.MaxInflight = 3
	c := mustDial(t, cfg, addr)

	const goroutines, perG = 50, 10
	var (
		stop      = make(chan struct{})
		samplerWG sync.WaitGroup
		maxSeen   atomic.Int32
		samples   atomic.Int64
	)
	samplerWG.Add(1)
	go func() {
		defer samplerWG.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			n := int32(c.Inflight())
			if n > maxSeen.Load() {
				maxSeen.Store(n)
			}
			samples.Add(1)
		}
	}()

	ctx := context.Background()
	var wg sync.WaitGroup
	errc := make(chan error, goroutines*perG)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				if i%4 == 3 { // mix in a different response type
					av := kmsg.NewPtrApiVersionsRequest()
					av.ClientSoftwareName, av.ClientSoftwareVersion = "riffle-test", "1"
					resp, err := c.Request(ctx, av)
					if err != nil {
						errc <- fmt.Errorf("g%d/%d ApiVersions: %w", g, i, err)
						return
					}
					if av, ok := resp.(*kmsg.ApiVersionsResponse); !ok || av.ErrorCode != 0 || len(av.ApiKeys) == 0 {
						errc <- fmt.Errorf("g%d/%d: bad ApiVersions response %T %+v", g, i, resp, resp)
					}
					continue
				}
				want := fmt.Sprintf("missing-%d-%d", g, i)
				resp, err := c.Request(ctx, metadataReq("t", want))
				if err != nil {
					errc <- fmt.Errorf("g%d/%d Metadata: %w", g, i, err)
					return
				}
				md, ok := resp.(*kmsg.MetadataResponse)
				if !ok {
					errc <- fmt.Errorf("g%d/%d: response %T", g, i, resp)
					return
				}
				var names []string
				for _, tp := range md.Topics {
					if tp.Topic != nil {
						names = append(names, *tp.Topic)
					}
				}
				if len(names) != 2 || !strings.Contains(strings.Join(names, ","), want) {
					errc <- fmt.Errorf("g%d/%d asked for t,%s and got topics %v: response mixed up", g, i, want, names)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	samplerWG.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if m := maxSeen.Load(); m > int32(cfg.MaxInflight) {
		t.Errorf("Inflight reached %d, above MaxInflight %d", m, cfg.MaxInflight)
	} else if m < 2 {
		t.Errorf("Inflight never went above %d in %d samples: requests were not pipelined", m, samples.Load())
	}
	if n := c.Inflight(); n != 0 {
		t.Errorf("Inflight after all responses = %d, want 0", n)
	}
	t.Logf("max inflight %d over %d samples", maxSeen.Load(), samples.Load())
}

func TestKfakeCloseFailsLaterRequests(t *testing.T) {
	addr := newKfake(t)
	c := mustDial(t, testConfig(), addr)
	if _, err := c.Request(context.Background(), metadataReq("t")); err != nil {
		t.Fatalf("Metadata before Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	awaitClosed(t, c, time.Second)
	if !errors.Is(c.Err(), errs.ErrConnClosed) {
		t.Errorf("Err() after Close = %v, want ErrConnClosed", c.Err())
	}
	// Several times: the request path races its channels against closed.
	for range 20 {
		resp, err := c.Request(context.Background(), metadataReq("t"))
		if !errors.Is(err, errs.ErrConnClosed) || resp != nil {
			t.Fatalf("Request after Close = %v, %v; want nil, ErrConnClosed", resp, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if n := c.Inflight(); n != 0 {
		t.Errorf("Inflight after failed requests = %d, want 0", n)
	}
}

// TestKfakeCloseDuringRequests closes a Conn under load: every request
// either succeeds or fails with ErrConnClosed, and none hangs.
func TestKfakeCloseDuringRequests(t *testing.T) {
	addr := newKfake(t)
	c := mustDial(t, testConfig(), addr)
	var (
		wg   sync.WaitGroup
		okN  atomic.Int64
		errc = make(chan error, 20)
	)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				resp, err := c.Request(context.Background(), metadataReq("t"))
				if err != nil {
					if !errors.Is(err, errs.ErrConnClosed) {
						errc <- err
					}
					return
				}
				if _, ok := resp.(*kmsg.MetadataResponse); !ok {
					errc <- fmt.Errorf("response %T", resp)
					return
				}
				okN.Add(1)
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for okN.Load() < 50 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	c.Close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	await(t, done, 5*time.Second, "requests after Close")
	close(errc)
	for err := range errc {
		t.Errorf("request failed with %v, want success or ErrConnClosed", err)
	}
	if okN.Load() == 0 {
		t.Error("no request succeeded before Close")
	}
	if n := c.Inflight(); n != 0 {
		t.Errorf("Inflight after Close = %d, want 0", n)
	}
}

// oneRecordBatch encodes a magic v2 batch holding one record.
func oneRecordBatch(value string) []byte {
	rec := kmsg.Record{Value: []byte(value)}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // minus the 1-byte varint 0
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: 1, FirstTimestamp: now, MaxTimestamp: now,
		Records: rec.AppendTo(nil),
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// produceReq builds a one-partition produce; Produce v13+ names topics by
// id, older versions by name, so it carries both.
func produceReq(acks int16, topic string, topicID [16]byte, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = acks
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rt.TopicID = topicID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestKfakeProduceAcks0 checks that an acks=0 produce returns nothing,
// reaches the broker, and leaves the stream in step for the next request.
func TestKfakeProduceAcks0(t *testing.T) {
	addr := newKfake(t)
	c := mustDial(t, testConfig(), addr)
	ctx := context.Background()
	md, err := c.Request(ctx, metadataReq("t"))
	if err != nil {
		t.Fatal(err)
	}
	id := md.(*kmsg.MetadataResponse).Topics[0].TopicID

	resp, err := c.Request(ctx, produceReq(0, "t", id, 0, oneRecordBatch("fire and forget")))
	if err != nil || resp != nil {
		t.Fatalf("acks=0 produce = %v, %v; want nil, nil", resp, err)
	}
	// acks=1 produce on the same connection gets its own response: the
	// reader did not wait for an answer to the acks=0 request.
	resp, err = c.Request(ctx, produceReq(1, "t", id, 0, oneRecordBatch("acked")))
	if err != nil {
		t.Fatalf("acks=1 produce: %v", err)
	}
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response %+v", pr)
	}
	p := pr.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Errorf("acks=1 record: error %d at offset %d; want 0 at offset 1 (after the acks=0 record)", p.ErrorCode, p.BaseOffset)
	}
	if n := c.Inflight(); n != 0 {
		t.Errorf("Inflight = %d, want 0", n)
	}
}

func TestKfakeSASL(t *testing.T) {
	addr := newKfake(t,
		kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "admin", "secret"),
		kfake.Superuser("SCRAM-SHA-256", "u256", "pw-256"),
		kfake.Superuser("SCRAM-SHA-512", "u512", "pw-512"),
	)
	const wrong = "Wr0ng-Pa55word"
	for _, tc := range []struct {
		name        string
		good, bad   sasl.Mechanism
		rightSecret string
	}{
		{"PLAIN", sasl.Plain("admin", "secret"), sasl.Plain("admin", wrong), "secret"},
		{"SCRAM-SHA-256", sasl.ScramSHA256("u256", "pw-256"), sasl.ScramSHA256("u256", wrong), "pw-256"},
		{"SCRAM-SHA-512", sasl.ScramSHA512("u512", "pw-512"), sasl.ScramSHA512("u512", wrong), "pw-512"},
		// A user of another mechanism is unknown to this one.
		{"SCRAM-SHA-512 unknown user", sasl.ScramSHA512("u256", "pw-256"), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.bad == nil {
				cfg := testConfig()
				cfg.SASL = PureSASL(tc.good)
				de := dialErr(t, context.Background(), cfg, addr)
				if !errors.Is(de, errs.ErrAuth) || de.Cause() != "auth" || de.Stage != StageSASL {
					t.Errorf("unknown user: %v (cause %q, stage %q); want ErrAuth, auth, sasl", de, de.Cause(), de.Stage)
				}
				return
			}
			cfg := testConfig()
			cfg.SASL = PureSASL(tc.good)
			c := mustDial(t, cfg, addr)
			resp, err := c.Request(context.Background(), metadataReq("t"))
			if err != nil {
				t.Fatalf("Metadata after SASL: %v", err)
			}
			checkMetadataT(t, resp)

			cfg = testConfig()
			cfg.SASL = PureSASL(tc.bad)
			start := time.Now()
			de := dialErr(t, context.Background(), cfg, addr)
			if !errors.Is(de, errs.ErrAuth) {
				t.Errorf("wrong password: %v does not match ErrAuth", de)
			}
			if de.Cause() != "auth" || de.Stage != StageSASL {
				t.Errorf("wrong password: cause %q, stage %q; want auth, sasl", de.Cause(), de.Stage)
			}
			if errs.IsRetriable(de) {
				t.Errorf("wrong password: %v is classified retriable", de)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("wrong password took %v to fail", d)
			}
			for _, s := range []string{de.Error(), fmt.Sprintf("%+v", de), fmt.Sprintf("%v", de.Err)} {
				if strings.Contains(s, wrong) || strings.Contains(s, tc.rightSecret) {
					t.Errorf("error text reveals a password: %s", s)
				}
			}
		})
	}
}

// unknownMech is a mechanism kfake does not offer.
type unknownMech struct{}

func (unknownMech) Name() string { return "OAUTHBEARER" }
func (unknownMech) Start(context.Context, SASLBroker) (SASLSession, []byte, error) {
	return nil, nil, errors.New("Start must not be called when the broker refuses the mechanism")
}

func TestKfakeSASLUnknownMechanism(t *testing.T) {
	addr := newKfake(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret"))
	cfg := testConfig()
	cfg.SASL = unknownMech{}
	de := dialErr(t, context.Background(), cfg, addr)
	if !errors.Is(de, errs.ErrAuth) || de.Cause() != "auth" || de.Stage != StageSASL {
		t.Errorf("unknown mechanism: %v (cause %q, stage %q); want ErrAuth, auth, sasl", de, de.Cause(), de.Stage)
	}
	if !strings.Contains(de.Error(), "OAUTHBEARER") || !strings.Contains(de.Error(), "PLAIN") {
		t.Errorf("error %q should name the mechanism tried and the ones enabled", de)
	}
}

// TestKfakeSASLRequired checks that a broker requiring SASL, dialed without
// it, fails the first request rather than hanging or passing it off as
// success.
func TestKfakeSASLRequired(t *testing.T) {
	addr := newKfake(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret"))
	cfg := testConfig()
	cfg.RequestTimeout = 2 * time.Second
	c := mustDial(t, cfg, addr) // ApiVersions is allowed before SASL
	_, err := c.Request(context.Background(), metadataReq("t"))
	if err == nil {
		t.Fatal("Metadata without SASL succeeded")
	}
	if !errs.IsRetriable(err) && !errors.Is(err, errs.ErrConnClosed) {
		t.Errorf("error %v is not a connection error", err)
	}
	awaitClosed(t, c, time.Second)
}

func TestKfakeTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	addr := newKfake(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))

	t.Run("trusted", func(t *testing.T) {
		cfg := testConfig()
		cfg.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		c := mustDial(t, cfg, addr)
		resp, err := c.Request(context.Background(), metadataReq("t"))
		if err != nil {
			t.Fatalf("Metadata over TLS: %v", err)
		}
		checkMetadataT(t, resp)
		if cfg.TLS.ServerName != "" {
			t.Error("Dial modified the caller's tls.Config")
		}
	})
	t.Run("untrusted", func(t *testing.T) {
		cfg := testConfig()
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12} // system roots only
		de := dialErr(t, context.Background(), cfg, addr)
		if de.Cause() != "tls" || de.Stage != StageTLS {
			t.Errorf("untrusted cert: %v (cause %q, stage %q); want tls", de, de.Cause(), de.Stage)
		}
	})
	t.Run("wrong name", func(t *testing.T) {
		cfg := testConfig()
		cfg.TLS = &tls.Config{RootCAs: pool, ServerName: "not-this-broker.example", MinVersion: tls.VersionTLS12}
		de := dialErr(t, context.Background(), cfg, addr)
		if de.Cause() != "tls" {
			t.Errorf("wrong server name: %v (cause %q); want tls", de, de.Cause())
		}
	})
}

func TestKfakeObserver(t *testing.T) {
	addr := newKfake(t)
	obs := &recObserver{}
	cfg := testConfig()
	cfg.Observer = obs
	c := mustDial(t, cfg, addr)
	req := metadataReq("t")
	if _, err := c.Request(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	c.Close()

	conn := obs.of("connected")
	if len(conn) != 1 || conn[0].addr != addr || conn[0].node != 1 || conn[0].err != nil || conn[0].d <= 0 {
		t.Errorf("Connected events = %+v, want one for %s node 1 with no error", conn, addr)
	}
	reqs := obs.of("request")
	if len(reqs) != 1 {
		t.Fatalf("Request events = %+v, want exactly one (the handshake is not reported)", reqs)
	}
	e := reqs[0]
	wantWritten := len(wire.NewFormatter(cfg.ClientID).Append(nil, req)) // req carries its negotiated version now
	if e.key != 3 || e.written != wantWritten || e.read <= 8 || e.err != nil || e.d <= 0 {
		t.Errorf("Request event %+v: want key 3, written %d, read > 8, no error", e, wantWritten)
	}
	disc := obs.of("disconnected")
	if len(disc) != 1 || !errors.Is(disc[0].err, errs.ErrConnClosed) {
		t.Errorf("Disconnected events = %+v, want one with ErrConnClosed", disc)
	}
	if all := obs.snapshot(); all[len(all)-1].kind != "disconnected" {
		t.Errorf("last event is %q, want disconnected", all[len(all)-1].kind)
	}
}

// The finalized feature levels of ApiVersions are kept: a 4.x cluster
// finalizes transaction.version 2 (KIP-890), a 3.9 one none.
func TestKfakeFeatures(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []kfake.Opt
		want int16
	}{
		{"stable", nil, 2},
		{"3.9", []kfake.Opt{kfake.MaxVersions(kversion.V3_9_0())}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustDial(t, testConfig(), newKfake(t, tc.opts...))
			if got := c.Versions().Feature("transaction.version"); got != tc.want {
				t.Fatalf("transaction.version %d, want %d", got, tc.want)
			}
		})
	}
}
