package riffle

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Validate-only admin calls: Java's validateOnly option of createTopics,
// createPartitions, incrementalAlterConfigs and updateFeatures. Most of
// the calls take their items variadically, so the option is a view of
// the Admin rather than an argument: Admin.ValidateOnly().CreateTopics(ctx, specs...) is
// CreateTopics with ValidateOnly set in the request. Only the calls
// whose requests have the flag are on the view, so a call that would
// act for real cannot be mistaken for a dry run.

// ValidateOnlyAdmin sends the admin calls that brokers can validate
// without applying them (Java's validateOnly option). Each call takes
// the arguments and returns the results of the Admin call of the same
// name: the broker runs its checks (names, counts, replication factor,
// config names and values, authorization, create-topic policies) and
// answers per item as it would for the real call, but changes nothing. Get
// one from Admin.ValidateOnly.
type ValidateOnlyAdmin struct{ a *Admin }

// ValidateOnly returns the validate-only form of the calls that support
// it: CreateTopics, CreatePartitions, AlterTopicConfigs,
// IncrementalAlterBrokerConfigs, IncrementalAlterBrokerLoggers,
// AlterGroupConfigs and UpdateFeatures.
func (a *Admin) ValidateOnly() *ValidateOnlyAdmin { return &ValidateOnlyAdmin{a} }

// CreateTopics validates the creation of topics without creating them:
// one result per topic, nil when the topic would be created, otherwise
// the broker's error (e.g. ErrTopicAlreadyExists,
// ErrInvalidReplicationFactor, ErrPolicyViolation). Brokers older than
// Kafka 0.10.2 (CreateTopics v0, which has no ValidateOnly) fail the call
// with ErrUnsupported rather than create the topics.
func (v *ValidateOnlyAdmin) CreateTopics(ctx context.Context, topics ...TopicSpec) (TopicResults, error) {
	return v.a.createTopics(ctx, topics, true)
}

// CreatePartitions validates raising the partition count of topics to
// total without adding any partition: one result per topic, nil when the
// change would be made, otherwise the broker's error (e.g.
// ErrInvalidPartitions, ErrUnknownTopicOrPartition).
func (v *ValidateOnlyAdmin) CreatePartitions(ctx context.Context, total int32, topics ...string) (TopicResults, error) {
	return v.a.createPartitions(ctx, total, topics, true)
}

// AlterTopicConfigs validates incremental topic config changes without
// applying them, as Admin.AlterTopicConfigs would make them: one result
// per distinct topic; invalid changes fail locally with ErrInvalidConfig
// as there.
func (v *ValidateOnlyAdmin) AlterTopicConfigs(ctx context.Context, changes ...AlterConfig) (TopicResults, error) {
	return v.a.alterTopicConfigs(ctx, changes, true)
}

// IncrementalAlterBrokerConfigs validates incremental broker config
// changes without applying them, as Admin.IncrementalAlterBrokerConfigs
// would make them (each broker's changes checked by that broker): one
// result per distinct broker.
func (v *ValidateOnlyAdmin) IncrementalAlterBrokerConfigs(ctx context.Context, changes ...BrokerConfigChange) (BrokerResults, error) {
	return v.a.incrementalAlterBrokerConfigs(ctx, changes, true)
}

// IncrementalAlterBrokerLoggers validates broker logger level changes
// without applying them, as Admin.IncrementalAlterBrokerLoggers would make
// them: one result per distinct broker.
func (v *ValidateOnlyAdmin) IncrementalAlterBrokerLoggers(ctx context.Context, changes ...BrokerConfigChange) (BrokerResults, error) {
	return v.a.incrementalAlterBrokerLoggers(ctx, changes, true)
}

// minVersionRequest is a request that must not go out below version min
// (the connection's version pick fails with ErrUnsupported instead): a
// field it sets does not exist in older versions, which would drop it
// silently.
type minVersionRequest struct {
	kmsg.Request
	min int16
}

func (r minVersionRequest) MinVersion() int16 { return r.min }
