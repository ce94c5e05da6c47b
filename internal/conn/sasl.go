package conn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxSASLRoundTrips bounds an exchange: a broker that keeps challenging
// must not keep a connection in its handshake forever.
const maxSASLRoundTrips = 16

// session is the outcome of a successful authentication: when the broker
// ends the session (KIP-368), measured from the last SaslAuthenticate
// request sent, which is no later than the broker's own clock starts.
type session struct {
	lifetime time.Duration // 0: the broker never ends it
	start    time.Time
}

// roundTripFunc sends one request (version set) and returns its response
// body. The handshake uses its own loop before the reader starts; a
// re-authentication goes through the connection's pipeline.
type roundTripFunc func(req kmsg.Request) ([]byte, error)

// authenticate runs SaslHandshake then SaslAuthenticate until the mechanism
// is done. A rejection is errs.ErrAuth: retrying with the same credentials
// would only hammer the broker. Errors name the broker and mechanism, never
// the credentials.
func authenticate(ctx context.Context, mech SASLMechanism, broker SASLBroker, vers *Versions, rt roundTripFunc) (session, error) {
	addr := broker.Addr
	hs := kmsg.NewPtrSASLHandshakeRequest()
	v, ok := vers.Max(hs.Key(), 1)
	if !ok {
		return session{}, fmt.Errorf("SaslHandshake: %w", errs.ErrUnsupported)
	}
	hs.SetVersion(v)
	hs.Mechanism = mech.Name()
	body, err := rt(hs)
	if err != nil {
		return session{}, err
	}
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	hsResp.SetVersion(v)
	if err := parse(hsResp, body); err != nil {
		return session{}, fmt.Errorf("SaslHandshake: %w: %v", errs.ErrMalformed, err)
	}
	if hsResp.ErrorCode != 0 {
		return session{}, fmt.Errorf("%w: broker %s does not accept mechanism %s (enabled: %v): %w",
			errs.ErrAuth, addr, mech.Name(), hsResp.SupportedMechanisms, kafkaerr.ForCode(hsResp.ErrorCode))
	}
	authV, ok := vers.Max(36, kmsg.NewPtrSASLAuthenticateRequest().MaxVersion())
	if !ok {
		return session{}, fmt.Errorf("SaslAuthenticate: %w", errs.ErrUnsupported)
	}
	sess, msg, err := mech.Start(ctx, broker)
	if err != nil {
		return session{}, fmt.Errorf("%w: %s: %w", errs.ErrAuth, mech.Name(), err)
	}
	var (
		lastSent bool  // the message in msg is the last one
		failed   error // the mechanism failed; msg only lets the broker finish
	)
	for step := 0; ; step++ {
		if step > maxSASLRoundTrips {
			return session{}, fmt.Errorf("%w: %s: too many SASL round trips with broker %s", errs.ErrAuth, mech.Name(), addr)
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(authV)
		req.SASLAuthBytes = msg
		sent := time.Now()
		body, err := rt(req)
		if err != nil {
			if failed != nil {
				return session{}, fmt.Errorf("%w: broker %s rejected %s: %w", errs.ErrAuth, addr, mech.Name(), failed)
			}
			if errors.Is(err, io.EOF) {
				// Brokers before Kafka 1.0 (and kfake) reject credentials
				// by closing the connection instead of answering.
				return session{}, fmt.Errorf("%w: broker %s closed the connection in answer to %s credentials: %w", errs.ErrAuth, addr, mech.Name(), err)
			}
			return session{}, err
		}
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		resp.SetVersion(authV)
		if err := parse(resp, body); err != nil {
			return session{}, fmt.Errorf("SaslAuthenticate: %w: %v", errs.ErrMalformed, err)
		}
		if resp.ErrorCode != 0 || failed != nil {
			reason := ""
			if resp.ErrorMessage != nil {
				reason = ": " + truncate(*resp.ErrorMessage, maxBrokerMessage)
			}
			if failed != nil {
				if resp.ErrorCode == 0 {
					return session{}, fmt.Errorf("%w: broker %s rejected %s: %w%s", errs.ErrAuth, addr, mech.Name(), failed, reason)
				}
				return session{}, fmt.Errorf("%w: broker %s rejected %s: %w%s: %w", errs.ErrAuth, addr, mech.Name(), failed, reason, kafkaerr.ForCode(resp.ErrorCode))
			}
			return session{}, fmt.Errorf("%w: broker %s rejected %s%s: %w", errs.ErrAuth, addr, mech.Name(), reason, kafkaerr.ForCode(resp.ErrorCode))
		}
		s := session{start: sent}
		if resp.SessionLifetimeMillis > 0 {
			s.lifetime = time.Duration(resp.SessionLifetimeMillis) * time.Millisecond
		}
		if lastSent {
			return s, nil
		}
		done, next, err := sess.Challenge(ctx, resp.SASLAuthBytes)
		if err != nil {
			if next == nil {
				return session{}, fmt.Errorf("%w: broker %s: %s: %w", errs.ErrAuth, addr, mech.Name(), err)
			}
			// Tell the broker we give up, then report what it says.
			failed, msg = err, next
			continue
		}
		if done && next == nil {
			return s, nil
		}
		// done with a message: send it, and its answer ends the exchange.
		msg, lastSent = next, done
	}
}

// maxBrokerMessage bounds how much of a broker's error message ends up in
// an error, so a broker cannot flood logs through us.
const maxBrokerMessage = 256

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
