package awsmskiam_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/plugin/awsmskiam"
)

// A client of an MSK cluster with IAM authentication. Against MSK, give
// the cluster's bootstrap brokers (port 9098), riffle.DialTLS and, usually,
// no option: credentials come from the default chain and the region from
// the host name. Here a local stand-in for MSK checks the signature made
// with fixed example credentials.
func Example() {
	seeds, stop := startMSKStandIn() // MSK: "b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com:9098", ...
	defer stop()

	cl, err := riffle.NewClient(
		riffle.SeedBrokers(seeds...),
		// riffle.DialTLS(&tls.Config{}), // MSK requires TLS
		riffle.SASL(awsmskiam.Mechanism(
			awsmskiam.Region("us-east-1"), // only because the stand-in's address names no region
			awsmskiam.Credentials(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}, nil
			})),
		)),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topics, err := cl.Admin().ListTopics(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("authenticated; topics:", len(topics))
	// Output: authenticated; topics: 1
}

// Against MSK: the cluster's IAM bootstrap brokers, TLS, and credentials
// from the default chain (environment, shared files, roles).
func ExampleMechanism() {
	cl, err := riffle.NewClient(
		riffle.SeedBrokers("b-1.mycluster.abc123.c2.kafka.eu-west-1.amazonaws.com:9098"),
		riffle.DialTLS(&tls.Config{}),
		riffle.SASL(awsmskiam.Mechanism()),
	)
	if err != nil {
		panic(err)
	}
	defer cl.Close()
}
