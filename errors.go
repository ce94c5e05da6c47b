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
	// every metadata refresh of the retry budget.
	ErrUnknownTopic = errs.ErrUnknownTopic
	// ErrUnsupported means the broker supports no version of a request
	// the client needs.
	ErrUnsupported = errs.ErrUnsupported
	// ErrInvalidConfig wraps every configuration error.
	ErrInvalidConfig = errs.ErrConfig
)

// UnreachableError lists, for every address tried, why it could not be
// used (dial refused, timeout, dns, tls, auth, protocol, backing off).
type UnreachableError = cluster.UnreachableError

// AddrError is one address of an UnreachableError.
type AddrError = cluster.AddrError

// KafkaError is an error code returned by a broker. Two KafkaErrors match
// with errors.Is when their codes are equal, so
// errors.Is(err, riffle.ErrNotLeaderForPartition) works on wrapped errors.
type KafkaError = kafkaerr.Error

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
)

// KafkaErrorForCode returns the error for a Kafka protocol error code (nil
// for 0).
func KafkaErrorForCode(code int16) error { return kafkaerr.ForCode(code) }

// IsRetriable reports whether an operation that failed with err may
// succeed if retried.
func IsRetriable(err error) bool { return errs.IsRetriable(err) }
