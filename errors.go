package riffle

import (
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
)

// Errors returned by the client. Match them with errors.Is; the messages
// name the broker, topic and partition involved.
var (
	// ErrClosed matches the closed error of every object: a call made on
	// (or waiting in) a Client, Producer, Consumer or process.Processor
	// after its Close returns, at once, an error that matches ErrClosed,
	// and also the object's own sentinel (ErrClientClosed,
	// ErrProducerClosed, ErrConsumerClosed, process.ErrProcessorClosed),
	// so errors.Is(err, ErrClosed) says "closed" whatever was closed.
	ErrClosed = errs.ErrClosed
	// ErrClientClosed is returned by calls made on (or waiting in) a
	// closed client. It matches ErrClosed.
	ErrClientClosed = errs.ErrClientClosed
	// ErrConnClosed means a connection died with a request in flight. The
	// request's outcome is unknown. Retriable.
	ErrConnClosed = errs.ErrConnClosed
	// ErrRequestTimeout means a broker did not answer within the request
	// timeout; the connection was closed. Retriable.
	ErrRequestTimeout = errs.ErrRequestTimeout
	// ErrMalformedResponse means a broker sent bytes that are not a valid
	// response: an oversized frame, a truncated body, a wrong correlation
	// id or an undecodable body. The connection was closed. Retriable on a
	// new connection.
	ErrMalformedResponse = errs.ErrMalformed
	// ErrAuth means authentication (SASL) failed. Not retriable: the same
	// credentials will fail again.
	ErrAuth = errs.ErrAuth
	// ErrUnreachable means no broker could be reached. The error is also an
	// *UnreachableError listing every address tried and why.
	ErrUnreachable = errs.ErrUnreachable
	// ErrUnknownTopic means the cluster reported the topic as unknown on
	// every metadata refresh for UnknownTopicWait (a producer's
	// UnknownTopicTimeout), or the topic has no such partition.
	ErrUnknownTopic = errs.ErrUnknownTopic
	// ErrAuthorization matches every error a broker answers for a missing
	// ACL: any *_AUTHORIZATION_FAILED code (TOPIC_, GROUP_, CLUSTER_,
	// TRANSACTIONAL_ID_, DELEGATION_TOKEN_), each also matching its own
	// code (ErrTopicAuthorization, ErrClusterAuthorization, ...) and a
	// *KafkaError with errors.As. Not retriable until the ACL is granted.
	// Authentication failures (bad credentials) are ErrAuth instead.
	ErrAuthorization = kafkaerr.ErrAuthorization
	// ErrUnsupported means the broker supports no version of a request
	// the client needs.
	ErrUnsupported = errs.ErrUnsupported
	// ErrInvalidConfig wraps every configuration error.
	ErrInvalidConfig = errs.ErrConfig
)

// UnsupportedError says which request (and version) the broker lacks, the
// KIP that brought it and the Kafka release whose brokers have it, e.g.
// "riffle: unsupported by broker: ShareGroupHeartbeat (share groups,
// KIP-932) needs Kafka 4.2+ (...): the broker has no version of it". It
// matches ErrUnsupported; get it with errors.As. The client fails with it
// at once rather than retry: a request no version of which both sides
// speak, a consumer group with GroupProtocolConsumer whose coordinator
// cannot run KIP-848, a share consumer on a broker without share groups,
// group configs on a broker without them.
type UnsupportedError struct {
	// API is the request's name (ShareGroupHeartbeat); Version the
	// lowest version needed, -1 when any would do.
	API     string
	Version int16
	// Feature names what needs it, in a few words ("share groups").
	Feature string
	// KIP is the Kafka Improvement Proposal that brought the API or the
	// version ("KIP-932"), "" when not known.
	KIP string
	// Kafka is the first broker release that has it ("4.2").
	Kafka string
	// Note, when set, says how an older broker may enable it.
	Note string
	// Detail is what the broker had or said.
	Detail string
}

// Error formats the error as "riffle: unsupported by broker: API
// (feature, KIP) needs Kafka X+ (note): detail".
func (e *UnsupportedError) Error() string { return (*errs.UnsupportedError)(e).Error() }

// Is makes every UnsupportedError match ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// UnreachableError says that no broker could be reached, and why for each
// address tried: dial refused, timeout, dns, tls, auth, protocol, backing
// off. It matches ErrUnreachable with errors.Is, the caller's context
// error when that ended the attempt, ErrAuth when a failure was an
// authentication failure, and, when every address failed for a reason
// that retrying cannot fix (an untrusted certificate, a peer that does not
// speak Kafka), each address's error. Get it with errors.As (see the
// example).
type UnreachableError struct {
	// Addrs has one entry per address tried: seeds and known brokers.
	Addrs []AddrError
	// Ctx is the caller's context error, if the context ended the attempt.
	Ctx error
}

// AddrError is why one address of an UnreachableError could not be used.
type AddrError struct {
	Addr   string
	NodeID int32 // the broker's node id; -1 for a seed
	Err    error
}

// Cause classifies Err in a few words: dial refused, dial failed, timeout,
// dns, tls, auth, protocol, handshake failed, cancelled, not tried, or
// "backing off after" one of those when the address was not dialed again
// because it had just failed.
func (a AddrError) Cause() string { return cluster.AddrError(a).Cause() }

func (e *UnreachableError) internal() *cluster.UnreachableError {
	ie := &cluster.UnreachableError{Addrs: make([]cluster.AddrError, len(e.Addrs)), Ctx: e.Ctx}
	for i, a := range e.Addrs {
		ie.Addrs[i] = cluster.AddrError(a)
	}
	return ie
}

// Error names every address and its cause.
func (e *UnreachableError) Error() string { return e.internal().Error() }

// Unwrap returns the errors the UnreachableError matches (see its doc).
func (e *UnreachableError) Unwrap() []error { return e.internal().Unwrap() }

// Retriable reports whether another attempt may reach a broker: whether
// some address failed for a reason that can pass (refused, timeout, reset,
// not tried), or none was listed. IsRetriable defers to it.
func (e *UnreachableError) Retriable() bool { return e.internal().Retriable() }

// KafkaError is an error code returned by a broker, with the protocol's
// name and description for it. Two KafkaErrors match with errors.Is when
// their codes are equal, so errors.Is(err, riffle.ErrNotLeaderForPartition)
// works on wrapped errors; errors.As(err, &ke) with ke a *KafkaError gets
// the code of any Kafka error in err.
type KafkaError struct {
	// Code is the protocol's error code, e.g. 6 for NOT_LEADER_FOR_PARTITION.
	Code int16
	// Name is the protocol's name for the code, e.g. NOT_LEADER_FOR_PARTITION
	// (UNKNOWN_ERROR_CODE_n for a code this client does not know).
	Name string
	// Retriable says whether the protocol deems the error retriable.
	Retriable bool
	// Description is the protocol's description of the error.
	Description string
}

// Error formats the error as "NAME (code): description".
func (e *KafkaError) Error() string { return (*kafkaerr.Error)(e).Error() }

// Is reports whether target is a Kafka error with the same code.
func (e *KafkaError) Is(target error) bool { return (*kafkaerr.Error)(e).Is(target) }

// The client's errors are made below this package, as the internal types
// these are twins of; these let errors.As and errors.Is reach the twins.
func init() {
	kafkaerr.Exported.As = func(e *kafkaerr.Error, target any) bool {
		t, ok := target.(**KafkaError)
		if ok {
			*t = (*KafkaError)(e) // the same fields: the same value, no copy
		}
		return ok
	}
	kafkaerr.Exported.Of = func(err error) *kafkaerr.Error {
		if e, ok := err.(*KafkaError); ok {
			return (*kafkaerr.Error)(e)
		}
		return nil
	}
	errs.ExportUnsupported = func(e *errs.UnsupportedError, target any) bool {
		t, ok := target.(**UnsupportedError)
		if ok {
			*t = (*UnsupportedError)(e) // the same fields: the same value
		}
		return ok
	}
	cluster.ExportUnreachable = func(e *cluster.UnreachableError, target any) bool {
		t, ok := target.(**UnreachableError)
		if ok {
			ue := &UnreachableError{Addrs: make([]AddrError, len(e.Addrs)), Ctx: e.Ctx}
			for i, a := range e.Addrs {
				ue.Addrs[i] = AddrError(a)
			}
			*t = ue
		}
		return ok
	}
}

// Kafka errors the client surfaces most often. Any code can be built with
// KafkaErrorForCode.
var (
	ErrUnknownTopicOrPartition  = kafkaerr.ForCode(kafkaerr.UnknownTopicOrPartition)
	ErrNotLeaderForPartition    = kafkaerr.ForCode(kafkaerr.NotLeaderForPartition)
	ErrTopicAlreadyExists       = kafkaerr.ForCode(kafkaerr.TopicAlreadyExists)
	ErrInvalidPartitions        = kafkaerr.ForCode(kafkaerr.InvalidPartitions)
	ErrInvalidReplicationFactor = kafkaerr.ForCode(kafkaerr.InvalidReplicationFactor)
	ErrPolicyViolation          = kafkaerr.ForCode(kafkaerr.PolicyViolation)
	ErrTopicAuthorization       = kafkaerr.ForCode(kafkaerr.TopicAuthorizationFailed)
	ErrSASLAuthentication       = kafkaerr.ForCode(kafkaerr.SaslAuthenticationFailed)

	// ErrClusterAuthorization is CLUSTER_AUTHORIZATION_FAILED (31): the
	// principal lacks an ACL on the cluster, e.g. an idempotent
	// producer's InitProducerId without IDEMPOTENT_WRITE on the cluster or
	// WRITE on some topic. It matches ErrAuthorization too.
	ErrClusterAuthorization = kafkaerr.ForCode(kafkaerr.ClusterAuthorizationFailed)
)

// KafkaErrorForCode returns the error for a Kafka protocol error code (nil
// for 0).
func KafkaErrorForCode(code int16) error { return kafkaerr.ForCode(code) }

// IsRetriable reports whether an operation that failed with err may
// succeed if retried.
func IsRetriable(err error) bool { return errs.IsRetriable(err) }
