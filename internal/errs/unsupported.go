package errs

import (
	"fmt"
	"strings"
)

// UnsupportedError says what the broker lacks and what it takes: the API
// (and version) the client needs, the KIP that brought it and the Kafka
// release whose brokers have it. It matches ErrUnsupported.
type UnsupportedError struct {
	// API is the request's name (ShareGroupHeartbeat); Version the
	// lowest version needed, -1 when any would do.
	API     string
	Version int16
	// Feature names what needs it, in a few words ("share groups").
	Feature string
	// KIP is the Kafka Improvement Proposal that brought the API or the
	// version ("KIP-932").
	KIP string
	// Kafka is the broker release needed ("4.2"; "4.0").
	Kafka string
	// Note, when set, adds how an older broker may enable it.
	Note string
	// Detail is what the broker said or had: "the broker has no version
	// of it", "answered UNSUPPORTED_VERSION", "has v0 to v3".
	Detail string
}

func (e *UnsupportedError) Error() string {
	var b strings.Builder
	b.WriteString(ErrUnsupported.Error())
	b.WriteString(": ")
	b.WriteString(e.API)
	if e.Version > 0 {
		fmt.Fprintf(&b, " v%d", e.Version)
	}
	if e.Feature != "" || e.KIP != "" {
		b.WriteString(" (")
		b.WriteString(strings.Trim(e.Feature+", "+e.KIP, ", "))
		b.WriteString(")")
	}
	if e.Kafka != "" {
		fmt.Fprintf(&b, " needs Kafka %s+", e.Kafka)
		if e.Note != "" {
			fmt.Fprintf(&b, " (%s)", e.Note)
		}
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Is makes every UnsupportedError match ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// ExportUnsupported sets target to the exported twin of e (the root
// package's UnsupportedError, of the same fields) when target points to
// one; set by the root package.
var ExportUnsupported func(e *UnsupportedError, target any) bool

// As sets target to e's exported twin (see ExportUnsupported).
func (e *UnsupportedError) As(target any) bool {
	return ExportUnsupported != nil && ExportUnsupported(e, target)
}

// apiSince is, for the APIs a client meets missing on brokers still in
// use, the KIP that brought each and the first Kafka release whose brokers
// answer it (by API key).
var apiSince = map[int16]struct{ feature, kip, kafka, note string }{
	42: {"", "KIP-229", "1.1", ""},                                                                                      // DeleteGroups
	43: {"", "KIP-460", "2.4", ""},                                                                                      // ElectLeaders
	44: {"", "KIP-339", "2.3", ""},                                                                                      // IncrementalAlterConfigs
	45: {"partition reassignments", "KIP-455", "2.4", ""},                                                               // AlterPartitionAssignments
	46: {"partition reassignments", "KIP-455", "2.4", ""},                                                               // ListPartitionReassignments
	47: {"", "KIP-496", "2.4", ""},                                                                                      // OffsetDelete
	48: {"client quotas", "KIP-546", "2.6", ""},                                                                         // DescribeClientQuotas
	49: {"client quotas", "KIP-546", "2.6", ""},                                                                         // AlterClientQuotas
	50: {"SCRAM credentials", "KIP-554", "2.7", ""},                                                                     // DescribeUserScramCredentials
	51: {"SCRAM credentials", "KIP-554", "2.7", ""},                                                                     // AlterUserScramCredentials
	55: {"", "KIP-595", "3.0", ""},                                                                                      // DescribeQuorum
	57: {"feature flags", "KIP-584", "2.7", ""},                                                                         // UpdateFeatures
	60: {"", "KIP-700", "2.8", ""},                                                                                      // DescribeCluster
	61: {"", "KIP-664", "3.0", ""},                                                                                      // DescribeProducers
	65: {"", "KIP-664", "3.0", ""},                                                                                      // DescribeTransactions
	66: {"", "KIP-664", "3.0", ""},                                                                                      // ListTransactions
	68: {"consumer groups", "KIP-848", "4.0", "3.7 to 3.9 with group.coordinator.rebalance.protocols=classic,consumer"}, // ConsumerGroupHeartbeat
	69: {"consumer groups", "KIP-848", "4.0", "3.7 to 3.9 with group.coordinator.rebalance.protocols=classic,consumer"}, // ConsumerGroupDescribe
	71: {"client telemetry", "KIP-714", "3.7", "with a metrics reporter that receives client telemetry"},                // GetTelemetrySubscriptions
	72: {"client telemetry", "KIP-714", "3.7", "with a metrics reporter that receives client telemetry"},                // PushTelemetry
	74: {"", "KIP-714", "3.7", ""},                                                                                      // ListConfigResources (ListClientMetricsResources)
	75: {"", "KIP-966", "3.8", ""},                                                                                      // DescribeTopicPartitions
	76: {"share groups", "KIP-932", "4.2", shareNote},                                                                   // ShareGroupHeartbeat
	77: {"share groups", "KIP-932", "4.2", shareNote},                                                                   // ShareGroupDescribe
	78: {"share groups", "KIP-932", "4.2", shareNote},                                                                   // ShareFetch
	79: {"share groups", "KIP-932", "4.2", shareNote},                                                                   // ShareAcknowledge
	80: {"", "KIP-853", "3.9", ""},                                                                                      // AddRaftVoter
	81: {"", "KIP-853", "3.9", ""},                                                                                      // RemoveRaftVoter
	90: {"share groups", "KIP-932", "4.2", shareNote},                                                                   // DescribeShareGroupOffsets
	91: {"share groups", "KIP-932", "4.2", shareNote},                                                                   // AlterShareGroupOffsets
	92: {"share groups", "KIP-932", "4.2", shareNote},                                                                   // DeleteShareGroupOffsets
}

const shareNote = "4.1 with the feature share.version=1"

// Unsupported is the error for a request the broker has no usable version
// of: key's API (named name), needing at least version min (-1: any),
// with detail saying what the broker had.
func Unsupported(key int16, name string, min int16, detail string) *UnsupportedError {
	e := &UnsupportedError{API: name, Version: min, Detail: detail}
	if s, ok := apiSince[key]; ok && min <= 0 {
		e.Feature, e.KIP, e.Kafka, e.Note = s.feature, s.kip, s.kafka, s.note
	}
	return e
}
