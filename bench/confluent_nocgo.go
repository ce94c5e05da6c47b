//go:build !cgo

package main

import (
	"context"
	"errors"
)

const (
	confluentModule      = "github.com/confluentinc/confluent-kafka-go/v2"
	confluentUnavailable = "built without cgo (CGO_ENABLED=0); confluent-kafka-go needs cgo"
)

func bootConfluent(context.Context, []string) (func(), error) {
	return nil, errors.New(confluentUnavailable)
}
