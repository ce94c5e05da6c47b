package riffle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/riffle-go/riffle/internal/backoff"
	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/conn"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/riffle-go/riffle/internal/lifecycle"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TelemetryReporter collects the client's metrics for client telemetry
// pushes (KIP-714). The client asks a broker for its subscription
// (GetTelemetrySubscriptions), calls CollectTelemetry at the subscription's
// push interval and sends the result, compressed with the first codec the
// broker accepts, in a PushTelemetry request. plugin/otel implements it
// (otel.Telemetry); the library itself encodes no metrics.
type TelemetryReporter interface {
	// CollectTelemetry returns the metrics sub asks for
	// (sub.Requested) as a serialized OTLP MetricsData protobuf message,
	// uncompressed, with delta temporality if sub.DeltaTemporality. It
	// is called from one goroutine at a time and must return when ctx
	// ends. An error skips this push; the next one comes a push interval
	// later.
	CollectTelemetry(ctx context.Context, sub TelemetrySubscription) ([]byte, error)
}

// TelemetrySubscription is what a broker asked the client to push, from a
// GetTelemetrySubscriptions response.
type TelemetrySubscription struct {
	// ClientInstanceID is the id the broker assigned to this client
	// instance (a UUID), kept for the client's life.
	ClientInstanceID [16]byte
	// SubscriptionID identifies the subscription set; pushes carry it.
	SubscriptionID int32
	// RequestedMetrics are metric name prefixes: empty asks for nothing,
	// a single "" for everything.
	RequestedMetrics []string
	// DeltaTemporality asks for delta sums and histograms (cumulative
	// otherwise).
	DeltaTemporality bool
	// PushInterval is the time between pushes.
	PushInterval time.Duration
	// MaxBytes is the largest push payload (compressed) the broker
	// accepts; a larger one is not sent. 0 means no limit was given.
	MaxBytes int
	// Terminating is set for the last push, made when the client closes.
	Terminating bool
}

// Requested reports whether the subscription asks for the metric name: it
// starts with one of RequestedMetrics.
func (s TelemetrySubscription) Requested(name string) bool {
	for _, p := range s.RequestedMetrics {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// TelemetryPush turns on client telemetry (KIP-714): once the client has
// connected to a broker it fetches its telemetry subscription and pushes
// the metrics r collects at the interval the broker asks for (the first
// push after a random ±50% of it), re-fetching the subscription when the
// broker no longer knows it, backing off after errors, and pushing once
// more with Terminating set when the client closes (bounded by the
// RequestTimeout). The requests go to one broker, chosen as the Java
// client's leastLoadedNode: the connected broker with the fewest requests
// in flight (else one being dialed, else one that may be dialed); the
// client stays with it until a request to it fails, then backs off and
// fetches the subscription from another broker chosen the same way. A broker without KIP-714 support, one that has no
// subscription for the client (an empty RequestedMetrics: the client asks
// again after the push interval) or one that rejects the pushes as invalid
// stops nothing but the telemetry. Without this option no telemetry
// request is ever sent.
func TelemetryPush(r TelemetryReporter) Option {
	return func(c *clientConfig) { c.telemetry = r }
}

// defaultPushInterval replaces a broker's push interval of 0 or less
// (KIP-714's default, telemetry.push.interval.ms, is 5 minutes).
const defaultPushInterval = 5 * time.Minute

// errTelemetryTooLarge is why a push larger than the subscription's
// MaxBytes was not sent.
var errTelemetryTooLarge = errors.New("riffle: telemetry payload above the broker's TelemetryMaxBytes")

// telemetry is the push loop of a client with a TelemetryReporter. The
// client owns it: Client.Close calls close before closing the cluster, so
// the terminating push still has connections.
type telemetry struct {
	cl           *cluster.Cluster
	rep          TelemetryReporter
	log          *slog.Logger
	backoff      backoff.Policy
	closeTimeout time.Duration

	life       *lifecycle.Group
	runCtx     context.Context // cancelled by close: aborts a regular request
	cancelRun  context.CancelFunc
	stop       chan struct{} // closed by close
	connected  chan struct{} // closed at the first successful connection
	connOnce   sync.Once
	subscribed func(TelemetrySubscription) // tests: called when a subscription is taken, or nil

	// Owned by the loop: the address of the broker the requests go to,
	// "" until one is chosen (see pick), and the one that failed last.
	broker, failed string
}

func newTelemetry(cl *cluster.Cluster, rep TelemetryReporter, log *slog.Logger, cfg *clientConfig) *telemetry {
	t := &telemetry{
		cl: cl, rep: rep, log: log,
		backoff:      backoff.Policy{Base: max(cfg.retryBackoff.Base, 100*time.Millisecond), Max: 30 * time.Second, Jitter: 0.2},
		closeTimeout: cfg.requestTimeout,
		subscribed:   cfg.telemetrySubscribed,
		life:         lifecycle.New(),
		stop:         make(chan struct{}),
		connected:    make(chan struct{}),
	}
	t.runCtx, t.cancelRun = context.WithCancel(t.life.Context())
	return t
}

// start starts the loop.
func (t *telemetry) start() { t.life.Go(t.run) }

// telemetryObserver passes connection events on and tells the telemetry
// loop about the first successful connection: the loop dials nothing
// before the client itself has.
type telemetryObserver struct {
	next conn.Observer // nil without hooks
	t    *telemetry
}

func (o telemetryObserver) Connected(addr string, node int32, d time.Duration, err error) {
	if err == nil {
		o.t.connOnce.Do(func() { close(o.t.connected) })
	}
	if o.next != nil {
		o.next.Connected(addr, node, d, err)
	}
}

func (o telemetryObserver) Disconnected(addr string, node int32, err error) {
	if o.next != nil {
		o.next.Disconnected(addr, node, err)
	}
}

func (o telemetryObserver) Request(addr string, node int32, key int16, w, r int, lat time.Duration, err error) {
	if o.next != nil {
		o.next.Request(addr, node, key, w, r, lat, err)
	}
}

func (o telemetryObserver) Throttled(addr string, node int32, d time.Duration) {
	if o.next != nil {
		o.next.Throttled(addr, node, d)
	}
}

// close ends the loop: a loop holding a subscription pushes once more with
// Terminating set (within closeTimeout) before it returns. Concurrent
// calls wait for the first.
func (t *telemetry) close() {
	if !t.life.Close() {
		<-t.life.Done()
		return
	}
	close(t.stop)
	t.cancelRun()
	t.life.Wait() // the loop returns by itself, at most closeTimeout later
	t.life.Finish()
}

// sleep waits d and reports false if close was called first.
func (t *telemetry) sleep(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-t.stop:
		return false
	}
}

// firstPushDelay is KIP-714's first push after a subscription: the
// interval with ±50% jitter, so clients started together spread out.
func firstPushDelay(interval time.Duration, rnd float64) time.Duration {
	return time.Duration(float64(interval) * (0.5 + rnd))
}

func (t *telemetry) run() {
	select {
	case <-t.connected:
	case <-t.stop:
		return
	}
	var (
		instance [16]byte
		sub      *telemetrySub
		failures int
		wait     time.Duration
	)
	for {
		if sub == nil {
			s, err := t.subscribe(t.runCtx, instance)
			switch {
			case err == nil:
				failures = 0
				sub, instance = s, s.ClientInstanceID
				wait = firstPushDelay(s.PushInterval, rand.Float64())
				if t.subscribed != nil {
					t.subscribed(s.TelemetrySubscription)
				}
			case t.runCtx.Err() != nil:
				return
			case telemetryPermanent(err):
				t.log.Info("client telemetry off: the broker does not support it", "err", err)
				return
			default:
				failures++
				wait = t.backoff.Delay(failures, rand.Float64())
				t.log.Debug("client telemetry: fetching the subscription failed", "broker", t.broker, "err", err, "retry_in", wait)
				t.leave()
			}
		}
		if !t.sleep(wait) {
			t.terminate(sub)
			return
		}
		if sub == nil {
			continue
		}
		if len(sub.RequestedMetrics) == 0 {
			sub = nil // nothing subscribed: ask again after the interval
			continue
		}
		err := t.push(t.runCtx, sub, false)
		wait = sub.PushInterval
		switch {
		case err == nil:
			failures = 0
		case t.runCtx.Err() != nil:
			t.terminate(sub) // close interrupted the push
			return
		case errors.Is(err, kafkaerr.ForCode(kafkaerr.UnknownSubscriptionID)),
			errors.Is(err, kafkaerr.ForCode(kafkaerr.UnsupportedCompressionType)):
			// The subscription changed: fetch it again now.
			t.log.Debug("client telemetry: re-fetching the subscription", "err", err)
			sub, wait = nil, 0
		case errors.Is(err, kafkaerr.ForCode(kafkaerr.InvalidRequest)),
			errors.Is(err, kafkaerr.ForCode(kafkaerr.InvalidRecord)),
			telemetryPermanent(err):
			t.log.Warn("client telemetry off: the broker rejected a push", "err", err)
			return
		case errors.Is(err, kafkaerr.ForCode(kafkaerr.TelemetryTooLarge)),
			errors.Is(err, kafkaerr.ForCode(kafkaerr.ThrottlingQuotaExceeded)),
			errors.Is(err, errTelemetryTooLarge), errors.Is(err, errTelemetryCollect):
			// This push is lost; the next comes at the interval.
			t.log.Debug("client telemetry: push skipped", "err", err)
		default:
			// A connection or broker error: back off, then fetch the
			// subscription again, from another broker.
			failures++
			sub, wait = nil, t.backoff.Delay(failures, rand.Float64())
			t.log.Debug("client telemetry: push failed", "broker", t.broker, "err", err, "retry_in", wait)
			t.leave()
		}
	}
}

// terminate makes the last push, with Terminating set, if the client holds
// a subscription that asks for metrics.
func (t *telemetry) terminate(sub *telemetrySub) {
	if sub == nil || len(sub.RequestedMetrics) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(t.life.Context(), t.closeTimeout)
	defer cancel()
	if err := t.push(ctx, sub, true); err != nil {
		t.log.Debug("client telemetry: terminating push failed", "err", err)
	}
}

// errNoTelemetryBroker: every broker is backing off after failed dials.
var errNoTelemetryBroker = errors.New("riffle: client telemetry: no broker to send to (all backing off)")

// request sends req to the loop's broker, choosing one first if there is
// none: the least loaded (cluster.LeastLoaded, Java's leastLoadedNode),
// passing over the one that failed last. The loop stays with its broker
// until a request to it fails (leave), as KIP-714 asks: the broker keeps
// the client's subscription state.
func (t *telemetry) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if t.broker == "" {
		loads := t.cl.Loads()
		i := cluster.LeastLoaded(loads, rand.IntN(max(len(loads), 1)), t.failed)
		if i < 0 {
			return nil, errNoTelemetryBroker
		}
		t.broker = loads[i].Addr
		t.log.Debug("client telemetry: broker chosen", "broker", t.broker, "node", loads[i].NodeID,
			"connected", loads[i].Connected, "inflight", loads[i].Inflight)
	}
	return t.cl.RequestAt(ctx, t.broker, req)
}

// leave drops the loop's broker after a failure: the next request goes
// to another one.
func (t *telemetry) leave() {
	if t.broker != "" {
		t.failed, t.broker = t.broker, ""
	}
}

// telemetryPermanent reports errors that end telemetry for the client's
// life: no broker version of the request, or the broker saying so.
func telemetryPermanent(err error) bool {
	return errors.Is(err, errs.ErrUnsupported) || errors.Is(err, kafkaerr.ForCode(kafkaerr.UnsupportedVersion)) ||
		errors.Is(err, errs.ErrClientClosed)
}

// telemetrySub is a subscription and the codec its pushes use.
type telemetrySub struct {
	TelemetrySubscription
	codec batch.Codec
}

// errTelemetryCollect wraps the reporter's errors.
var errTelemetryCollect = errors.New("riffle: collecting telemetry failed")

func (t *telemetry) subscribe(ctx context.Context, instance [16]byte) (*telemetrySub, error) {
	req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	req.ClientInstanceID = instance
	kresp, err := t.request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp, ok := kresp.(*kmsg.GetTelemetrySubscriptionsResponse)
	if !ok {
		return nil, fmt.Errorf("GetTelemetrySubscriptions: %w: response of type %T", ErrMalformedResponse, kresp)
	}
	if err := kafkaerr.ForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("GetTelemetrySubscriptions: %w", err)
	}
	if resp.ClientInstanceID == [16]byte{} {
		return nil, fmt.Errorf("GetTelemetrySubscriptions: %w: no client instance id", ErrMalformedResponse)
	}
	s := &telemetrySub{TelemetrySubscription: TelemetrySubscription{
		ClientInstanceID: resp.ClientInstanceID,
		SubscriptionID:   resp.SubscriptionID,
		RequestedMetrics: resp.RequestedMetrics,
		DeltaTemporality: resp.DeltaTemporality,
		PushInterval:     time.Duration(resp.PushIntervalMillis) * time.Millisecond,
		MaxBytes:         int(max(resp.TelemetryMaxBytes, 0)),
	}}
	if s.PushInterval <= 0 {
		s.PushInterval = defaultPushInterval
	}
	// The broker lists the codecs in its order of preference; take the
	// first this client has.
	for _, c := range resp.AcceptedCompressionTypes {
		if codec := batch.Codec(c); codec.Valid() {
			s.codec = codec
			break
		}
	}
	return s, nil
}

func (t *telemetry) push(ctx context.Context, s *telemetrySub, terminating bool) error {
	sub := s.TelemetrySubscription
	sub.Terminating = terminating
	data, err := t.rep.CollectTelemetry(ctx, sub)
	if err != nil {
		return fmt.Errorf("%w: %w", errTelemetryCollect, err)
	}
	req := kmsg.NewPtrPushTelemetryRequest()
	req.ClientInstanceID, req.SubscriptionID, req.Terminating = sub.ClientInstanceID, sub.SubscriptionID, terminating
	req.Metrics = data
	if s.codec != batch.CodecNone && len(data) > 0 {
		if c, err := batch.Compress(nil, data, s.codec); err == nil {
			req.Metrics, req.CompressionType = c, int8(s.codec)
		}
	}
	if sub.MaxBytes > 0 && len(req.Metrics) > sub.MaxBytes {
		return fmt.Errorf("%w: %d bytes, limit %d", errTelemetryTooLarge, len(req.Metrics), sub.MaxBytes)
	}
	kresp, err := t.request(ctx, req)
	if err != nil {
		return err
	}
	resp, ok := kresp.(*kmsg.PushTelemetryResponse)
	if !ok {
		return fmt.Errorf("PushTelemetry: %w: response of type %T", ErrMalformedResponse, kresp)
	}
	if err := kafkaerr.ForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("PushTelemetry: %w", err)
	}
	return nil
}
