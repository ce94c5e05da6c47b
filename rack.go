package riffle

// Rack sets the client's rack (the Java client's client.rack), empty by
// default (no rack). It is sent
//
//   - in every Fetch request (v11+, KIP-392), so that a broker with a
//     replica selector (replica.selector.class, e.g. Kafka's
//     RackAwareReplicaSelector) can name a replica in this rack as the
//     partition's preferred read replica; the consumer then fetches the
//     partition from that replica (see Consumer);
//   - in the group protocols: the classic consumer protocol's
//     subscription metadata (ConsumerProtocolSubscription v3) and KIP-848's
//     ConsumerGroupHeartbeat RackID, so that rack-aware assignors (KIP-881:
//     RangeBalancer, StickyBalancer and CooperativeStickyBalancer here and
//     in the Java client; the broker's assignors under KIP-848) prefer to
//     give a member partitions with a replica in its rack.
//
// Producers do not use it.
func Rack(id string) Option { return func(c *clientConfig) { c.rack = id } }
