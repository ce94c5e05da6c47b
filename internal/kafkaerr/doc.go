// Package kafkaerr maps Kafka protocol error codes to typed, comparable Go
// errors with the protocol's own names and retriability. The table in
// codes.go comes from the protocol's published error list.
package kafkaerr
