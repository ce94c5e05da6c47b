//go:build cgo

package main

// confluent-kafka-go wraps librdkafka through cgo; its module ships a
// prebuilt static librdkafka for common platforms, so it needs a C
// toolchain but no system library. Builds without cgo use
// confluent_nocgo.go, which lists the client as unavailable.

import (
	"context"
	"errors"
	"strings"
	"time"

	ckafka "github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

const (
	confluentModule      = "github.com/confluentinc/confluent-kafka-go/v2"
	confluentUnavailable = ""
)

// bootConfluent: librdkafka connects lazily from its own threads; an admin
// client's GetMetadata blocks until a broker answers or its timeout, which
// we set to what is left of the cap. The only setting changed is
// log_level, so librdkafka's connection-failure logs do not land on stderr
// in the middle of the table; it does not change connection behaviour.
func bootConfluent(ctx context.Context, seeds []string) (func(), error) {
	ac, err := ckafka.NewAdminClient(&ckafka.ConfigMap{
		"bootstrap.servers": strings.Join(seeds, ","),
		"log_level":         0,
	})
	if err != nil {
		return nil, err
	}
	timeout := 15 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	md, err := ac.GetMetadata(nil, true, int(timeout.Milliseconds()))
	if err == nil && len(md.Brokers) == 0 {
		err = errors.New("metadata lists no brokers")
	}
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return ac.Close, err
}
