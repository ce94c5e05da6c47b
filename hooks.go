package riffle

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Hook is a metrics hook: any value implementing one or more of the Broker*
// hook interfaces. Hooks run on the client's connection goroutines, so
// they must be fast and must not block.
type Hook any

// BrokerInfo identifies a broker in hook calls. NodeID is -1 for a seed
// address not yet matched to a node.
type BrokerInfo struct {
	NodeID int32
	Addr   string
}

// BrokerConnectHook is called after every connection attempt.
type BrokerConnectHook interface {
	OnBrokerConnect(b BrokerInfo, dialTime time.Duration, err error)
}

// BrokerDisconnectHook is called when a connection closes, with the reason.
type BrokerDisconnectHook interface {
	OnBrokerDisconnect(b BrokerInfo, err error)
}

// RequestEvent describes one request/response exchange.
type RequestEvent struct {
	APIKey       int16
	APIName      string
	BytesWritten int
	BytesRead    int
	Latency      time.Duration
	Err          error
}

// BrokerRequestHook is called for every request when its response arrives
// or it fails.
type BrokerRequestHook interface {
	OnBrokerRequest(b BrokerInfo, e RequestEvent)
}

// BrokerThrottleHook is called when a broker says it throttled the client.
// The client waits out the throttle before sending more on that connection
// (KIP-219).
type BrokerThrottleHook interface {
	OnBrokerThrottle(b BrokerInfo, throttle time.Duration)
}

// hookObserver fans connection events out to the user's hooks.
type hookObserver struct {
	connect    []BrokerConnectHook
	disconnect []BrokerDisconnectHook
	request    []BrokerRequestHook
	throttle   []BrokerThrottleHook
}

func newHookObserver(hooks []Hook) *hookObserver {
	o := &hookObserver{}
	for _, h := range hooks {
		if x, ok := h.(BrokerConnectHook); ok {
			o.connect = append(o.connect, x)
		}
		if x, ok := h.(BrokerDisconnectHook); ok {
			o.disconnect = append(o.disconnect, x)
		}
		if x, ok := h.(BrokerRequestHook); ok {
			o.request = append(o.request, x)
		}
		if x, ok := h.(BrokerThrottleHook); ok {
			o.throttle = append(o.throttle, x)
		}
	}
	if len(o.connect)+len(o.disconnect)+len(o.request)+len(o.throttle) == 0 {
		return nil
	}
	return o
}

func (o *hookObserver) Connected(addr string, node int32, d time.Duration, err error) {
	for _, h := range o.connect {
		h.OnBrokerConnect(BrokerInfo{node, addr}, d, err)
	}
}

func (o *hookObserver) Disconnected(addr string, node int32, err error) {
	for _, h := range o.disconnect {
		h.OnBrokerDisconnect(BrokerInfo{node, addr}, err)
	}
}

func (o *hookObserver) Request(addr string, node int32, key int16, w, r int, lat time.Duration, err error) {
	if len(o.request) == 0 {
		return
	}
	e := RequestEvent{APIKey: key, APIName: kmsg.NameForKey(key), BytesWritten: w, BytesRead: r, Latency: lat, Err: err}
	for _, h := range o.request {
		h.OnBrokerRequest(BrokerInfo{node, addr}, e)
	}
}

func (o *hookObserver) Throttled(addr string, node int32, d time.Duration) {
	for _, h := range o.throttle {
		h.OnBrokerThrottle(BrokerInfo{node, addr}, d)
	}
}
