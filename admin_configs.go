package riffle

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Configs of topics, brokers and groups (admin_group_configs.go):
// DescribeTopicConfigs, DescribeBrokerConfigs, DescribeGroupConfigs,
// AlterTopicConfigs, IncrementalAlterBrokerConfigs and AlterGroupConfigs
// share one path (describeKeyed, alterKeyed, configRouted): the config
// of a given broker is asked of that broker (brokers only answer for
// themselves), every other resource of any broker; resources whose answer
// is retriable are asked again within the client's retry budget.

// DefaultBroker names the cluster-wide default broker config (the broker
// resource with an empty name, as Java's ConfigResource(BROKER, "")) in
// DescribeBrokerConfigs and IncrementalAlterBrokerConfigs: dynamic
// configs set there apply to every broker that has no value of its own.
const DefaultBroker int32 = -1

// ConfigEntry is one config of a resource.
type ConfigEntry struct {
	Name      string
	Value     *string // nil when sensitive or unset
	Source    string  // e.g. DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG
	ReadOnly  bool
	Sensitive bool
	IsDefault bool
	// Type is the config's data type (BOOLEAN, STRING, INT, SHORT,
	// LONG, DOUBLE, LIST, CLASS, PASSWORD), UNKNOWN from brokers before
	// DescribeConfigs v3 and for broker loggers.
	Type string
	// Synonyms are the values the config would fall back to, in the
	// order the broker applies them, the effective one first (Java's
	// ConfigEntry.synonyms; DescribeConfigs v1+): e.g. a topic's
	// retention.ms, then the broker's log.retention.ms, then its
	// default.
	Synonyms []ConfigSynonym
}

// ConfigSynonym is one value a config takes from one source.
type ConfigSynonym struct {
	Name   string
	Value  *string // nil when sensitive or unset
	Source string
}

// TopicConfigs is the configuration of one topic.
type TopicConfigs struct {
	Topic   string
	Configs []ConfigEntry
	Err     error
}

// BrokerConfigs is the configuration of one broker, or the cluster-wide
// default (Broker DefaultBroker).
type BrokerConfigs struct {
	Broker int32
	// Configs are sorted by name.
	Configs []ConfigEntry
	// Err is the broker's error: why it could not answer, or e.g.
	// CLUSTER_AUTHORIZATION_FAILED; Configs is then empty.
	Err error
}

// ConfigOp is the operation of an incremental config change (KIP-339).
type ConfigOp int8

// Config operations, with their wire values.
// ConfigOpSet sets the config to Value; with a nil Value it deletes it.
const ConfigOpSet ConfigOp = 0

// ConfigOpDelete deletes the config: it reverts to its default.
const ConfigOpDelete ConfigOp = 1

// ConfigOpAppend adds Value (comma-separated items) to a list config.
const ConfigOpAppend ConfigOp = 2

// ConfigOpSubtract removes Value's items from a list config.
const ConfigOpSubtract ConfigOp = 3

// String returns SET, DELETE, APPEND or SUBTRACT.
func (o ConfigOp) String() string {
	switch o {
	case ConfigOpSet:
		return "SET"
	case ConfigOpDelete:
		return "DELETE"
	case ConfigOpAppend:
		return "APPEND"
	case ConfigOpSubtract:
		return "SUBTRACT"
	}
	return fmt.Sprintf("ConfigOp(%d)", int8(o))
}

// AlterConfig changes one config of a topic: Value sets it, a nil Value
// deletes it (back to the default). Op, ConfigOpSet by default, may also
// be ConfigOpDelete, ConfigOpAppend or ConfigOpSubtract.
type AlterConfig struct {
	Topic string
	Name  string
	Value *string
	Op    ConfigOp
}

// BrokerConfigChange changes one config of a broker, or of the cluster-wide
// default (Broker DefaultBroker). Op is ConfigOpSet by default (a nil
// Value then deletes the config), or ConfigOpDelete, ConfigOpAppend or
// ConfigOpSubtract.
type BrokerConfigChange struct {
	Broker int32
	Name   string
	Value  *string
	Op     ConfigOp
}

// BrokerResult is the outcome of an admin operation for one broker. Err is
// nil on success or a *KafkaError (e.g. INVALID_REQUEST,
// INVALID_CONFIG), or why the broker could not be reached.
type BrokerResult struct {
	Broker int32
	Err    error
}

// BrokerResults is one result per broker, in request order.
type BrokerResults []BrokerResult

// Err joins the per-broker errors (nil if every broker succeeded).
func (rs BrokerResults) Err() error {
	var all []error
	for _, r := range rs {
		if r.Err != nil {
			all = append(all, fmt.Errorf("broker %s: %w", brokerName(r.Broker), r.Err))
		}
	}
	return errors.Join(all...)
}

// configResource is a resource of DescribeConfigs and
// IncrementalAlterConfigs.
type configResource struct {
	typ  kmsg.ConfigResourceType
	name string
}

// node is the broker that must answer for r, -1 for any broker.
func (r configResource) node() int32 {
	if r.typ == kmsg.ConfigResourceTypeBroker || r.typ == kmsg.ConfigResourceTypeBrokerLogger {
		if id, err := strconv.ParseInt(r.name, 10, 32); err == nil {
			return int32(id)
		}
	}
	return -1
}

func brokerResource(id int32) configResource {
	r := configResource{typ: kmsg.ConfigResourceTypeBroker}
	if id != DefaultBroker {
		r.name = strconv.Itoa(int(id))
	}
	return r
}

// brokerName is a broker id in messages: its number, or "default".
func brokerName(id int32) string {
	if id == DefaultBroker {
		return "default"
	}
	return strconv.Itoa(int(id))
}

// configRouted sends config requests for resources: those of a given
// broker to that broker, the others to any broker, one request per
// destination (destinations in parallel). Resources whose reply code
// (per code) is retriable, or whose broker could not be reached for a
// retriable reason, are sent again within the client's retry budget.
//
// It returns the final reply of every resource that got one and, for the
// others, why they got none. The error is for the whole call: the
// caller's context ended or the client closed.
func configRouted[R any](ctx context.Context, a *Admin, resources []configResource,
	send func(ctx context.Context, rs []configResource) (kmsg.Request, func(kmsg.Response) map[configResource]R),
	code func(R) int16,
) (replies map[configResource]R, failed map[configResource]error, err error) {
	cl := a.c.cl
	replies, failed = map[configResource]R{}, map[configResource]error{}
	var ids []int32
	for _, r := range resources {
		if n := r.node(); n >= 0 {
			ids = append(ids, n)
		}
	}
	known, err := a.knownBrokers(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	var pending []configResource
	for _, r := range resources {
		if n := r.node(); n >= 0 && !known[n] {
			failed[r] = fmt.Errorf("%w: %d", ErrUnknownBroker, n)
			continue
		}
		pending = append(pending, r)
	}
	if len(pending) == 0 {
		return replies, failed, nil
	}
	err = cl.Retry(ctx, func(ctx context.Context) error {
		byNode := map[int32][]configResource{}
		var order []int32
		for _, r := range pending {
			n := r.node()
			if _, ok := byNode[n]; !ok {
				order = append(order, n)
			}
			byNode[n] = append(byNode[n], r)
		}
		var (
			mu       sync.Mutex
			wg       sync.WaitGroup
			retry    []configResource
			retryErr error
		)
		for _, node := range order {
			rs := byNode[node]
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, parse := send(ctx, rs)
				var resp kmsg.Response
				var err error
				dest := "any broker"
				if node < 0 {
					resp, err = cl.RequestAnyOnce(ctx, req)
				} else {
					dest = fmt.Sprintf("broker %d", node)
					resp, err = cl.Request(ctx, node, cluster.ClassOther, req)
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					err = fmt.Errorf("%s: %w", dest, err)
					if errs.IsRetriable(err) {
						retry = append(retry, rs...)
						retryErr = err
					} else {
						for _, r := range rs {
							failed[r] = err
						}
					}
					return
				}
				got := parse(resp)
				for _, r := range rs {
					rep, ok := got[r]
					switch {
					case !ok:
						failed[r] = fmt.Errorf("%s: %w: no result for the resource in the response", dest, errs.ErrMalformed)
					case configRetriable(code(rep)):
						retry = append(retry, r)
						retryErr = fmt.Errorf("%s: %w", dest, kafkaerr.ForCode(code(rep)))
					default:
						replies[r] = rep
						delete(failed, r)
					}
				}
			}()
		}
		wg.Wait()
		pending = retry
		if len(retry) > 0 {
			return fmt.Errorf("configs: %d resources to retry: %w", len(retry), retryErr)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, errs.ErrClientClosed) {
			return nil, nil, err
		}
		for _, r := range pending {
			failed[r] = err
		}
	}
	return replies, failed, nil
}

// configRetriable reports the per-resource codes worth asking again: the
// retriable ones, but for UNKNOWN_TOPIC_OR_PARTITION, which is final here
// (the topic does not exist) as in Java's admin client.
func configRetriable(code int16) bool {
	return code != 0 && code != kafkaerr.UnknownTopicOrPartition && kafkaerr.Typed(code).Retriable
}

// describeConfigs describes resources (distinct) and returns each one's
// configs, sorted by name, and error.
func (a *Admin) describeConfigs(ctx context.Context, resources []configResource) (map[configResource][]ConfigEntry, map[configResource]error, error) {
	replies, failed, err := configRouted(ctx, a, resources,
		func(_ context.Context, rs []configResource) (kmsg.Request, func(kmsg.Response) map[configResource]kmsg.DescribeConfigsResponseResource) {
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.IncludeSynonyms = true
			for _, r := range rs {
				rr := kmsg.NewDescribeConfigsRequestResource()
				rr.ResourceType = r.typ
				rr.ResourceName = r.name
				req.Resources = append(req.Resources, rr)
			}
			return req, func(resp kmsg.Response) map[configResource]kmsg.DescribeConfigsResponseResource {
				out := map[configResource]kmsg.DescribeConfigsResponseResource{}
				for _, r := range resp.(*kmsg.DescribeConfigsResponse).Resources {
					out[configResource{r.ResourceType, r.ResourceName}] = r
				}
				return out
			}
		},
		func(r kmsg.DescribeConfigsResponseResource) int16 { return r.ErrorCode })
	if err != nil {
		return nil, nil, err
	}
	configs := map[configResource][]ConfigEntry{}
	for res, r := range replies {
		if e := withMessage(r.ErrorCode, r.ErrorMessage); e != nil {
			failed[res] = e
			continue
		}
		entries := make([]ConfigEntry, 0, len(r.Configs))
		for _, c := range r.Configs {
			e := ConfigEntry{
				Name: c.Name, Value: c.Value, Source: c.Source.String(), ReadOnly: c.ReadOnly,
				Sensitive: c.IsSensitive, IsDefault: c.Source == kmsg.ConfigSourceDefaultConfig,
				Type: c.ConfigType.String(),
			}
			if len(c.ConfigSynonyms) > 0 {
				e.Synonyms = make([]ConfigSynonym, len(c.ConfigSynonyms))
				for i, syn := range c.ConfigSynonyms {
					e.Synonyms[i] = ConfigSynonym{Name: syn.Name, Value: syn.Value, Source: syn.Source.String()}
				}
			}
			entries = append(entries, e)
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
		configs[res] = entries
	}
	return configs, failed, nil
}

// DescribeTopicConfigs returns the configs of topics, one result per topic.
func (a *Admin) DescribeTopicConfigs(ctx context.Context, topics ...string) ([]TopicConfigs, error) {
	return describeKeyed(ctx, a, topics, topicResource, nil, func(t string, cs []ConfigEntry, err error) TopicConfigs {
		return TopicConfigs{Topic: t, Configs: cs, Err: err}
	})
}

func topicResource(t string) configResource { return configResource{kmsg.ConfigResourceTypeTopic, t} }

// DescribeBrokerConfigs returns the configs of brokers by node id, one
// result per distinct id, in request order; DefaultBroker describes the
// cluster-wide default configs. Each broker is asked about itself (only
// it can answer); the default, of any broker.
func (a *Admin) DescribeBrokerConfigs(ctx context.Context, brokers ...int32) ([]BrokerConfigs, error) {
	return a.describePerBroker(ctx, brokers, brokerResource, checkConfigBroker)
}

// checkConfigBroker refuses a negative broker id other than DefaultBroker.
func checkConfigBroker(b int32) error {
	if b < 0 && b != DefaultBroker {
		return fmt.Errorf("%w: broker id %d (DefaultBroker, -1, names the cluster-wide default)", ErrInvalidConfig, b)
	}
	return nil
}

// describePerBroker describes the resource res names for each distinct
// broker, in request order; a broker check refuses fails locally.
func (a *Admin) describePerBroker(ctx context.Context, brokers []int32, res func(int32) configResource, check func(int32) error) ([]BrokerConfigs, error) {
	return describeKeyed(ctx, a, brokers, res, check, func(b int32, cs []ConfigEntry, err error) BrokerConfigs {
		return BrokerConfigs{Broker: b, Configs: cs, Err: err}
	})
}

// describeKeyed describes the resource res names for each distinct key (a
// topic, a broker, a group), in request order, and makes each key's result
// with mk. A key that check (if any) refuses fails locally: nothing is
// asked for it.
func describeKeyed[K comparable, T any](ctx context.Context, a *Admin, keys []K, res func(K) configResource, check func(K) error,
	mk func(key K, configs []ConfigEntry, err error) T,
) ([]T, error) {
	keys = uniqueKeys(keys)
	bad := map[K]error{}
	var rs []configResource
	for _, k := range keys {
		if check != nil {
			if err := check(k); err != nil {
				bad[k] = err
				continue
			}
		}
		rs = append(rs, res(k))
	}
	configs, failed, err := a.describeConfigs(ctx, rs)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(keys))
	for i, k := range keys {
		if e := bad[k]; e != nil {
			out[i] = mk(k, nil, e)
			continue
		}
		out[i] = mk(k, configs[res(k)], failed[res(k)])
	}
	return out, nil
}

// DescribeBrokerLoggers returns the log levels of brokers' loggers (the
// BROKER_LOGGER resource, Java's ConfigResource.Type.BROKER_LOGGER), one
// result per distinct broker id, in request order: each entry names a
// logger and its level. Each broker is asked about itself; there is no
// cluster-wide default, so DefaultBroker and other negative ids fail with
// ErrInvalidConfig.
func (a *Admin) DescribeBrokerLoggers(ctx context.Context, brokers ...int32) ([]BrokerConfigs, error) {
	return a.describePerBroker(ctx, brokers, loggerResource, checkLoggerBroker)
}

// checkLoggerBroker refuses a broker id with no loggers of its own.
func checkLoggerBroker(b int32) error {
	if b < 0 {
		return fmt.Errorf("%w: broker id %d: broker loggers are per broker", ErrInvalidConfig, b)
	}
	return nil
}

// IncrementalAlterBrokerLoggers sets or resets the levels of brokers'
// loggers (Name a logger, Value a level such as DEBUG or INFO; ConfigOpSet
// with a nil Value, or ConfigOpDelete, resets it to the root logger's
// level), one result per distinct broker, in request order. Each change
// goes to its broker. A negative broker id, an empty name, or APPEND or
// SUBTRACT (loggers are not lists) fails its broker with ErrInvalidConfig,
// and nothing is sent for it. ValidateOnly().IncrementalAlterBrokerLoggers
// checks the changes without applying them.
func (a *Admin) IncrementalAlterBrokerLoggers(ctx context.Context, changes ...BrokerConfigChange) (BrokerResults, error) {
	return a.incrementalAlterBrokerLoggers(ctx, changes, false)
}

func (a *Admin) incrementalAlterBrokerLoggers(ctx context.Context, changes []BrokerConfigChange, validateOnly bool) (BrokerResults, error) {
	return a.alterPerBroker(ctx, changes, validateOnly, loggerResource, func(ch BrokerConfigChange) error {
		if err := checkLoggerBroker(ch.Broker); err != nil {
			return err
		}
		if ch.Op == ConfigOpAppend || ch.Op == ConfigOpSubtract {
			return fmt.Errorf("%w: %s of logger %q: a logger's level is not a list", ErrInvalidConfig, ch.Op, ch.Name)
		}
		return nil
	})
}

func loggerResource(id int32) configResource {
	return configResource{typ: kmsg.ConfigResourceTypeBrokerLogger, name: strconv.Itoa(int(id))}
}

// alterConfigs sends IncrementalAlterConfigs for the changes of each
// resource (resources in order, each once) and returns each one's error.
// With validateOnly the brokers check the changes and apply none.
func (a *Admin) alterConfigs(ctx context.Context, resources []configResource, changes map[configResource][]kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) (map[configResource]error, error) {
	replies, failed, err := configRouted(ctx, a, resources,
		func(_ context.Context, rs []configResource) (kmsg.Request, func(kmsg.Response) map[configResource]error) {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			req.ValidateOnly = validateOnly
			for _, r := range rs {
				rr := kmsg.NewIncrementalAlterConfigsRequestResource()
				rr.ResourceType = r.typ
				rr.ResourceName = r.name
				rr.Configs = changes[r]
				req.Resources = append(req.Resources, rr)
			}
			return req, func(resp kmsg.Response) map[configResource]error {
				out := map[configResource]error{}
				for _, r := range resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
					out[configResource{r.ResourceType, r.ResourceName}] = withMessage(r.ErrorCode, r.ErrorMessage)
				}
				return out
			}
		},
		func(e error) int16 {
			var ke *kafkaerr.Error
			if errors.As(e, &ke) {
				return ke.Code
			}
			return 0
		})
	if err != nil {
		return nil, err
	}
	for r, e := range replies {
		failed[r] = e
	}
	return failed, nil
}

// alterOp is the wire form of one change; an error for an invalid one.
func alterOp(name string, value *string, op ConfigOp) (kmsg.IncrementalAlterConfigsRequestResourceConfig, error) {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = name, value
	switch {
	case name == "":
		return c, fmt.Errorf("%w: empty config name", ErrInvalidConfig)
	case op == ConfigOpSet && value == nil:
		op = ConfigOpDelete
	case op == ConfigOpDelete:
		c.Value = nil
	case (op == ConfigOpAppend || op == ConfigOpSubtract) && value == nil:
		return c, fmt.Errorf("%w: %s of config %q needs a value", ErrInvalidConfig, op, name)
	case op < ConfigOpSet || op > ConfigOpSubtract:
		return c, fmt.Errorf("%w: unknown config operation %d for config %q", ErrInvalidConfig, int8(op), name)
	}
	c.Op = kmsg.IncrementalAlterConfigOp(op)
	return c, nil
}

// AlterTopicConfigs changes topic configs incrementally (only the named
// keys change), one result per distinct topic, in request order. An
// invalid change (an empty name, an unknown Op, APPEND or SUBTRACT
// without a value) fails its topic with ErrInvalidConfig, and nothing is
// sent for that topic. ValidateOnly().AlterTopicConfigs checks the changes
// without applying them.
func (a *Admin) AlterTopicConfigs(ctx context.Context, changes ...AlterConfig) (TopicResults, error) {
	return a.alterTopicConfigs(ctx, changes, false)
}

func (a *Admin) alterTopicConfigs(ctx context.Context, changes []AlterConfig, validateOnly bool) (TopicResults, error) {
	chs := make([]configChange[string], len(changes))
	for i, ch := range changes {
		chs[i] = configChange[string]{ch.Topic, ch.Name, ch.Value, ch.Op}
	}
	topics, errs, err := alterKeyed(ctx, a, chs, validateOnly, topicResource, nil)
	if err != nil {
		return nil, err
	}
	out := make(TopicResults, len(topics))
	for i, t := range topics {
		out[i] = TopicResult{Topic: t, Err: errs[t]}
	}
	return out, nil
}

// IncrementalAlterBrokerConfigs changes dynamic broker configs
// incrementally (only the named keys change), one result per distinct
// broker, in request order. A change for a given broker is sent to that
// broker; a change of the cluster-wide default (DefaultBroker) to any
// broker. An invalid change (an empty name, a negative broker id other
// than DefaultBroker, an unknown Op, APPEND or SUBTRACT without a value)
// fails its broker with ErrInvalidConfig, and nothing is sent for it.
// ValidateOnly().IncrementalAlterBrokerConfigs checks the changes without
// applying them.
func (a *Admin) IncrementalAlterBrokerConfigs(ctx context.Context, changes ...BrokerConfigChange) (BrokerResults, error) {
	return a.incrementalAlterBrokerConfigs(ctx, changes, false)
}

func (a *Admin) incrementalAlterBrokerConfigs(ctx context.Context, changes []BrokerConfigChange, validateOnly bool) (BrokerResults, error) {
	return a.alterPerBroker(ctx, changes, validateOnly, brokerResource, func(ch BrokerConfigChange) error {
		return checkConfigBroker(ch.Broker)
	})
}

// alterPerBroker sends the changes of each distinct broker to the resource
// res names for it, one result per broker in request order. A change that
// check refuses or that is invalid fails its broker locally, and nothing
// is sent for that broker.
func (a *Admin) alterPerBroker(ctx context.Context, changes []BrokerConfigChange, validateOnly bool, res func(int32) configResource, check func(BrokerConfigChange) error) (BrokerResults, error) {
	chs := make([]configChange[int32], len(changes))
	for i, ch := range changes {
		chs[i] = configChange[int32]{ch.Broker, ch.Name, ch.Value, ch.Op}
	}
	brokers, errs, err := alterKeyed(ctx, a, chs, validateOnly, res, func(ch configChange[int32]) error {
		return check(BrokerConfigChange{Broker: ch.key, Name: ch.name, Value: ch.value, Op: ch.op})
	})
	if err != nil {
		return nil, err
	}
	out := make(BrokerResults, len(brokers))
	for i, b := range brokers {
		out[i] = BrokerResult{Broker: b, Err: errs[b]}
	}
	return out, nil
}

// configChange is one change of the config resource of a key (a topic, a
// broker, a group).
type configChange[K comparable] struct {
	key   K
	name  string
	value *string
	op    ConfigOp
}

// alterKeyed sends the changes of each distinct key to the resource res
// names for it, and returns the keys in request order with each one's
// error. A change that check (if any) refuses or that is invalid fails its
// key locally, and nothing is sent for that key.
func alterKeyed[K comparable](ctx context.Context, a *Admin, changes []configChange[K], validateOnly bool, res func(K) configResource, check func(configChange[K]) error) ([]K, map[K]error, error) {
	var keys []K
	seen := map[K]bool{}
	ops := map[configResource][]kmsg.IncrementalAlterConfigsRequestResourceConfig{}
	bad := map[K]error{}
	for _, ch := range changes {
		if !seen[ch.key] {
			seen[ch.key] = true
			keys = append(keys, ch.key)
		}
		if check != nil {
			if err := check(ch); err != nil {
				bad[ch.key] = err
				continue
			}
		}
		c, err := alterOp(ch.name, ch.value, ch.op)
		if err != nil {
			bad[ch.key] = err
			continue
		}
		r := res(ch.key)
		ops[r] = append(ops[r], c)
	}
	var rs []configResource
	for _, k := range keys {
		if bad[k] == nil {
			rs = append(rs, res(k))
		}
	}
	got, err := a.alterConfigs(ctx, rs, ops, validateOnly)
	if err != nil {
		return nil, nil, err
	}
	errs := make(map[K]error, len(keys))
	for _, k := range keys {
		if e := bad[k]; e != nil {
			errs[k] = e
		} else {
			errs[k] = got[res(k)]
		}
	}
	return keys, errs, nil
}

// uniqueInt32s drops repeated ids, keeping the first occurrence.
func uniqueInt32s(in []int32) []int32 { return uniqueKeys(in) }

// uniqueKeys drops repeated keys, keeping the first occurrence.
func uniqueKeys[K comparable](in []K) []K {
	seen := make(map[K]bool, len(in))
	out := make([]K, 0, len(in))
	for _, k := range in {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
