package riffle

import (
	"context"
	"errors"
	"fmt"

	"github.com/riffle-go/riffle/internal/kafkaerr"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group configs: the GROUP config resource (KIP-848, KIP-932; resource
// type 32 on the wire, Java's ConfigResource.Type.GROUP), the per-group
// overrides of the broker's group.* defaults, named without the "group."
// prefix: share.auto.offset.reset, share.isolation.level,
// share.record.lock.duration.ms, share.delivery.count.limit,
// share.session.timeout.ms, share.heartbeat.interval.ms,
// consumer.session.timeout.ms, consumer.heartbeat.interval.ms and more.
// A share group's member cannot set them (a ShareConsumer refuses
// OffsetReset and Isolation): these calls are how an application does.
// Any broker answers for any group, as in Java's admin client; the
// requests go the way of the topic configs' (configRouted).

// GroupConfigs is the configuration of one group.
type GroupConfigs struct {
	Group string
	// Configs are sorted by name. An override has Source GROUP_CONFIG. A
	// config the group does not override takes the broker's value of
	// its group.* config: Source is that config's (DEFAULT_CONFIG, or
	// e.g. STATIC_BROKER_CONFIG when server.properties sets
	// group.consumer.heartbeat.interval.ms), and the Synonyms, named
	// with the "group." prefix, say where it comes from.
	Configs []ConfigEntry
	// Err is why the group's configs could not be described, e.g.
	// GROUP_AUTHORIZATION_FAILED, or ErrInvalidConfig for an empty name.
	Err error
}

// GroupConfigChange changes one config of a group: Value sets it, a nil
// Value deletes it (back to the broker's default). Op, ConfigOpSet by
// default, may also be ConfigOpDelete; group configs are not lists, so
// brokers refuse ConfigOpAppend and ConfigOpSubtract (INVALID_CONFIG).
type GroupConfigChange struct {
	Group string
	Name  string
	Value *string
	Op    ConfigOp
}

func groupResource(g string) configResource {
	return configResource{kmsg.ConfigResourceTypeGroupConfig, g}
}

// checkConfigGroup refuses the empty group name, which names no group
// config resource.
func checkConfigGroup(g string) error {
	if g == "" {
		return fmt.Errorf("%w: empty group name", ErrInvalidConfig)
	}
	return nil
}

// DescribeGroupConfigs returns the configs of groups (consumer or share
// groups), one result per distinct group, in request order. A group that
// does not exist is described with every config at its default, as the
// broker answers: a group's configs may be set before it has a member.
// An empty name fails its result with ErrInvalidConfig, and nothing is
// asked for it.
func (a *Admin) DescribeGroupConfigs(ctx context.Context, groups ...string) ([]GroupConfigs, error) {
	out, err := describeKeyed(ctx, a, groups, groupResource, checkConfigGroup, func(g string, cs []ConfigEntry, err error) GroupConfigs {
		return GroupConfigs{Group: g, Configs: cs, Err: err}
	})
	if err != nil {
		return nil, err
	}
	var noGroupConfigs *UnsupportedError
	for i := range out {
		if errors.Is(out[i].Err, kafkaerr.ForCode(kafkaerr.InvalidRequest)) {
			if noGroupConfigs == nil && !a.hasGroupConfigs(ctx) {
				noGroupConfigs = groupConfigsUnsupported("DescribeConfigs")
			}
			if noGroupConfigs != nil {
				out[i].Err = fmt.Errorf("%w: %w", noGroupConfigs, out[i].Err)
			}
		}
	}
	return out, nil
}

// hasGroupConfigs says whether the cluster may have the GROUP config
// resource (KIP-848): a broker that finalizes group.version does; Kafka 3.9,
// which finalizes none, answers INVALID_REQUEST for it.
func (a *Admin) hasGroupConfigs(ctx context.Context) bool {
	fm, err := a.DescribeFeatures(ctx)
	if err != nil {
		return true // unknown: leave the broker's answer as it is
	}
	_, ok := fm.Finalized["group.version"]
	return ok
}

// groupConfigsUnsupported is the error for group configs on a broker
// without them.
func groupConfigsUnsupported(api string) *UnsupportedError {
	return &UnsupportedError{API: api, Version: -1, Feature: "group configs, config resource GROUP", KIP: "KIP-848", Kafka: "4.0",
		Detail: "the cluster finalizes no group.version and refused the resource"}
}

// AlterGroupConfigs changes group configs incrementally (only the named
// keys change), one result per distinct group, in request order. An
// invalid change (an empty group or config name, an unknown Op) fails its
// group with ErrInvalidConfig, and nothing is sent for that group; the
// broker refuses unknown config names and bad values with a *KafkaError,
// INVALID_CONFIG. A share group's share.auto.offset.reset applies to
// the partitions the group has not started yet; to move a group that has
// started, use AlterShareGroupOffsets. ValidateOnly().AlterGroupConfigs checks the changes without
// applying them.
func (a *Admin) AlterGroupConfigs(ctx context.Context, changes ...GroupConfigChange) (GroupResults, error) {
	return a.alterGroupConfigs(ctx, changes, false)
}

func (a *Admin) alterGroupConfigs(ctx context.Context, changes []GroupConfigChange, validateOnly bool) (GroupResults, error) {
	chs := make([]configChange[string], len(changes))
	for i, ch := range changes {
		chs[i] = configChange[string]{ch.Group, ch.Name, ch.Value, ch.Op}
	}
	groups, errs, err := alterKeyed(ctx, a, chs, validateOnly, groupResource, func(ch configChange[string]) error {
		return checkConfigGroup(ch.key)
	})
	if err != nil {
		return nil, err
	}
	out := make(GroupResults, len(groups))
	var noGroupConfigs *UnsupportedError
	for i, g := range groups {
		out[i] = GroupResult{Group: g, Err: errs[g]}
		if errors.Is(out[i].Err, kafkaerr.ForCode(kafkaerr.InvalidRequest)) {
			if noGroupConfigs == nil && !a.hasGroupConfigs(ctx) {
				noGroupConfigs = groupConfigsUnsupported("IncrementalAlterConfigs")
			}
			if noGroupConfigs != nil {
				out[i].Err = fmt.Errorf("%w: %w", noGroupConfigs, out[i].Err)
			}
		}
	}
	return out, nil
}

// AlterGroupConfigs validates incremental group config changes without
// applying them, as Admin.AlterGroupConfigs would make them: one result
// per distinct group; invalid changes fail locally with ErrInvalidConfig
// as there.
func (v *ValidateOnlyAdmin) AlterGroupConfigs(ctx context.Context, changes ...GroupConfigChange) (GroupResults, error) {
	return v.a.alterGroupConfigs(ctx, changes, true)
}
