package conn

import (
	"errors"
	"fmt"
	"io"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authenticate runs SaslHandshake then SaslAuthenticate until the mechanism
// is done. A rejection is errs.ErrAuth: retrying with the same credentials
// would only hammer the broker. Errors name the broker and mechanism, never
// the credentials.
func (h *handshake) authenticate(vers *Versions) error {
	mech := h.cfg.SASL
	hs := kmsg.NewPtrSASLHandshakeRequest()
	v, ok := vers.Max(hs.Key(), 1)
	if !ok {
		return fmt.Errorf("SaslHandshake: %w", errs.ErrUnsupported)
	}
	hs.SetVersion(v)
	hs.Mechanism = mech.Name()
	body, err := h.roundTrip(hs)
	if err != nil {
		return err
	}
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	hsResp.SetVersion(v)
	if err := parse(hsResp, body); err != nil {
		return fmt.Errorf("SaslHandshake: %w: %v", errs.ErrMalformed, err)
	}
	if hsResp.ErrorCode != 0 {
		return fmt.Errorf("%w: broker %s does not accept mechanism %s (enabled: %v): %w",
			errs.ErrAuth, h.addr, mech.Name(), hsResp.SupportedMechanisms, kafkaerr.ForCode(hsResp.ErrorCode))
	}
	authV, ok := vers.Max(36, kmsg.NewPtrSASLAuthenticateRequest().MaxVersion())
	if !ok {
		return fmt.Errorf("SaslAuthenticate: %w", errs.ErrUnsupported)
	}
	sess, msg, err := mech.Start()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errs.ErrAuth, mech.Name(), err)
	}
	lastSent := false
	for step := 0; ; step++ {
		if step > 16 {
			return fmt.Errorf("%w: %s: too many SASL round trips with broker %s", errs.ErrAuth, mech.Name(), h.addr)
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(authV)
		req.SASLAuthBytes = msg
		body, err := h.roundTrip(req)
		if err != nil {
			if errors.Is(err, io.EOF) {
				// Brokers before Kafka 1.0 (and kfake) reject credentials
				// by closing the connection instead of answering.
				return fmt.Errorf("%w: broker %s closed the connection in answer to %s credentials: %w", errs.ErrAuth, h.addr, mech.Name(), err)
			}
			return err
		}
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		resp.SetVersion(authV)
		if err := parse(resp, body); err != nil {
			return fmt.Errorf("SaslAuthenticate: %w: %v", errs.ErrMalformed, err)
		}
		if resp.ErrorCode != 0 {
			reason := ""
			if resp.ErrorMessage != nil {
				reason = ": " + *resp.ErrorMessage
			}
			return fmt.Errorf("%w: broker %s rejected %s%s: %w", errs.ErrAuth, h.addr, mech.Name(), reason, kafkaerr.ForCode(resp.ErrorCode))
		}
		if lastSent {
			return nil
		}
		done, next, err := sess.Step(resp.SASLAuthBytes)
		if err != nil {
			return fmt.Errorf("%w: broker %s: %s: %v", errs.ErrAuth, h.addr, mech.Name(), err)
		}
		if done && next == nil {
			return nil
		}
		// done with a message: send it, and its answer ends the exchange.
		msg, lastSent = next, done
	}
}
