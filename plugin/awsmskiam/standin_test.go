package awsmskiam_test

import (
	"encoding/json"
	"errors"

	"github.com/riffle-go/riffle/internal/saslfake"
	"github.com/twmb/franz-go/pkg/kfake"
)

// startMSKStandIn runs an in-process cluster behind a SASL front that
// accepts AWS_MSK_IAM payloads with the example access key (the signature
// itself is checked in TestMSKIAM).
func startMSKStandIn() (seeds []string, stop func()) {
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		panic(err)
	}
	fake, err := saslfake.New(kf.ListenAddrs(), saslfake.Config{
		Mechanisms: []string{"AWS_MSK_IAM"},
		Validate: func(a saslfake.Auth) ([]byte, error) {
			var f map[string]string
			if json.Unmarshal(a.Bytes, &f) != nil || f["action"] != "kafka-cluster:Connect" || f["x-amz-signature"] == "" {
				return nil, errors.New("Access denied")
			}
			return []byte(`{"version":"2020_10_22","request-id":"example"}`), nil
		},
	})
	if err != nil {
		panic(err)
	}
	return fake.Addrs(), func() { fake.Close(); kf.Close() }
}
