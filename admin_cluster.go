package riffle

import (
	"context"
	"sort"

	"github.com/riffle-go/riffle/internal/conn"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterInfo describes the cluster.
type ClusterInfo struct {
	ClusterID string
	// Controller is the node id of the controller as the broker reports
	// it, -1 when unknown. KRaft brokers report a live broker instead of
	// the controller quorum, as they do to Java's describeCluster.
	Controller int32
	// Brokers are sorted by node id.
	Brokers []BrokerMetadata
	// AuthorizedOperations are the cluster operations the client's
	// principal may perform; not Known unless DescribeCluster was given
	// IncludeAuthorizedOperations and the broker reported them.
	AuthorizedOperations ACLOperationSet
}

// DescribeOption is an option of DescribeCluster and DescribeTopics.
type DescribeOption func(*describeOptions)

type describeOptions struct {
	authorizedOps bool
}

// IncludeAuthorizedOperations asks the broker for the ACL operations the
// client's principal may perform on what is described (KIP-430; Java's
// includeAuthorizedOperations and includeClusterAuthorizedOperations):
// ClusterInfo.AuthorizedOperations, TopicDetail.AuthorizedOperations.
// Brokers before Kafka 2.3 do not report them (the set is then not Known).
func IncludeAuthorizedOperations() DescribeOption {
	return func(o *describeOptions) { o.authorizedOps = true }
}

func describeOptionsOf(opts []DescribeOption) describeOptions {
	var o describeOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// DescribeCluster returns the cluster id, controller and brokers, and with
// IncludeAuthorizedOperations the cluster operations the client may
// perform (Java's describeCluster). It asks any broker with DescribeCluster
// (KIP-700, Kafka 2.8+), or with a Metadata request when the broker does
// not support it; a failed attempt is retried within the client's retry
// budget.
func (a *Admin) DescribeCluster(ctx context.Context, opts ...DescribeOption) (ClusterInfo, error) {
	o := describeOptionsOf(opts)
	cl := a.c.cl
	var info ClusterInfo
	err := cl.Retry(ctx, func(ctx context.Context) error {
		cn, err := cl.AnyConn(ctx)
		if err != nil {
			return err
		}
		req := kmsg.NewPtrDescribeClusterRequest()
		if _, ok := cn.Versions().Max(req.Key(), req.MaxVersion()); ok {
			info, err = describeClusterKIP700(ctx, cn, req, o)
		} else {
			info, err = describeClusterMetadata(ctx, cn, o)
		}
		return err
	})
	if err != nil {
		return ClusterInfo{}, err
	}
	return info, nil
}

func describeClusterKIP700(ctx context.Context, cn *conn.Conn, req *kmsg.DescribeClusterRequest, o describeOptions) (ClusterInfo, error) {
	req.IncludeClusterAuthorizedOperations = o.authorizedOps
	resp, err := cn.Request(ctx, req)
	if err != nil {
		return ClusterInfo{}, err
	}
	r := resp.(*kmsg.DescribeClusterResponse)
	if err := withMessage(r.ErrorCode, r.ErrorMessage); err != nil {
		return ClusterInfo{}, err
	}
	info := ClusterInfo{ClusterID: r.ClusterID, Controller: r.ControllerID, Brokers: make([]BrokerMetadata, 0, len(r.Brokers))}
	for _, b := range r.Brokers {
		info.Brokers = append(info.Brokers, BrokerMetadata{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: deref(b.Rack)})
	}
	sortBrokers(info.Brokers)
	if o.authorizedOps {
		info.AuthorizedOperations = aclOperationsOf(r.ClusterAuthorizedOperations)
	}
	return info, nil
}

// describeClusterMetadata describes the cluster from a Metadata request
// for no topics, at most v10: v8 to v10 carry the cluster's authorized
// operations (v11 moved them to DescribeCluster, which every broker that
// speaks Metadata v11 supports).
func describeClusterMetadata(ctx context.Context, cn *conn.Conn, o describeOptions) (ClusterInfo, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none (nil is all)
	req.IncludeClusterAuthorizedOperations = o.authorizedOps
	resp, err := cn.Request(ctx, cappedRequest{req, 10})
	if err != nil {
		return ClusterInfo{}, err
	}
	r := resp.(*kmsg.MetadataResponse)
	info := ClusterInfo{ClusterID: deref(r.ClusterID), Controller: r.ControllerID, Brokers: make([]BrokerMetadata, 0, len(r.Brokers))}
	for _, b := range r.Brokers {
		info.Brokers = append(info.Brokers, BrokerMetadata{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: deref(b.Rack)})
	}
	sortBrokers(info.Brokers)
	if o.authorizedOps && r.Version >= 8 {
		info.AuthorizedOperations = aclOperationsOf(r.AuthorizedOperations)
	}
	return info, nil
}

func sortBrokers(bs []BrokerMetadata) {
	sort.Slice(bs, func(i, j int) bool { return bs[i].NodeID < bs[j].NodeID })
}
