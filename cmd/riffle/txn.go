package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/spf13/cobra"
)

// txnCmd is "riffle txn".
func (a *app) txnCmd() *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:   "txn",
		Short: "List and describe transactions; show the producers active on a topic",
		Long: `Inspect transactions (Kafka 3.0 or later): list the transactional ids the
coordinators know, describe them with the partitions of their open
transaction, and show the producers active on the partitions of a topic,
with the offset where their open transaction started (a transaction left
open holds read_committed consumers back at that offset until it times
out).`,
		Example: `  riffle txn list --state Ongoing
  riffle txn describe payments-tx-0
  riffle txn producers payments`,
	})
	cmd.AddCommand(a.txnListCmd(), a.txnDescribeCmd(), a.txnProducersCmd())
	return cmd
}

// ---- txn list ----

type txnListingJSON struct {
	TransactionalID string `json:"transactional_id"`
	State           string `json:"state"`
	ProducerID      int64  `json:"producer_id"`
}

func (a *app) txnListCmd() *cobra.Command {
	var (
		states      []string
		producerIDs []int64
		minDuration time.Duration
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List transactional ids with their state and producer id",
		Long: `List the transactional ids of the cluster, sorted, with their state (Empty,
Ongoing, PrepareCommit, CompleteCommit, ...) and producer id. Every broker
is asked, since each knows only the ids it coordinates; if some broker
cannot answer, the ids of the others are listed and riffle exits with
status 1.

--state and --producer-id keep the matching ids (each may be repeated);
--min-duration keeps the transactions open for at least that long, which
needs Kafka 3.8 or later.`,
		Example: `  riffle txn list
  riffle txn list --state Ongoing --min-duration 5m
  riffle txn list -o json | jq -r '.[] | select(.state == "Ongoing") | .transactional_id'`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "keep transactions in this `STATE` (repeatable, or comma-separated)")
	cmd.Flags().Int64SliceVar(&producerIDs, "producer-id", nil, "keep transactions of this producer `ID` (repeatable)")
	cmd.Flags().DurationVar(&minDuration, "min-duration", 0, "keep transactions open for at least this `DURATION` (Kafka 3.8+)")
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if minDuration < 0 {
			return usageErrorf("--min-duration must not be negative, got %v", minDuration)
		}
		if cmd.Flags().Changed("state") && (len(states) == 0 || slices.ContainsFunc(states, func(s string) bool { return strings.TrimSpace(s) == "" })) {
			return usageErrorf("--state is empty")
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		txns, err := cl.Admin().ListTransactions(a.context(), riffle.TransactionFilters{
			States: states, ProducerIDs: producerIDs, MinDuration: minDuration,
		})
		if err != nil && txns == nil {
			return fmt.Errorf("listing transactions: %w", err)
		}
		out := make([]txnListingJSON, 0, len(txns))
		for _, t := range txns {
			out = append(out, txnListingJSON{TransactionalID: t.TransactionalID, State: t.State, ProducerID: t.ProducerID})
		}
		if *output == outputJSON {
			if werr := writeJSON(a.stdout, out); werr != nil {
				return werr
			}
		} else {
			tw := newTable(a.stdout)
			row(tw, "TRANSACTIONAL-ID", "STATE", "PRODUCER-ID")
			for _, t := range out {
				row(tw, t.TransactionalID, orDash(t.State), t.ProducerID)
			}
			tw.Flush()
		}
		return err // incomplete listing, or states the brokers do not know
	}
	return cmd
}

// ---- txn describe ----

type txnDescriptionJSON struct {
	TransactionalID string `json:"transactional_id"`
	State           string `json:"state"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	// Coordinator is the coordinator's node id, -1 if unknown.
	Coordinator int32 `json:"coordinator"`
	TimeoutMS   int64 `json:"timeout_ms"`
	// StartTime is when the open transaction started (RFC 3339, UTC,
	// milliseconds); null when none is open.
	StartTime *string `json:"start_time"`
	// Partitions maps each topic of the open transaction to its
	// partitions.
	Partitions map[string][]int32 `json:"partitions"`
	Error      string             `json:"error,omitempty"`
}

func (a *app) txnDescribeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe TRANSACTIONAL-ID...",
		Short: "Describe transactional ids: state, producer, open transaction",
		Long: `Describe each transactional id: its state, producer id and epoch, the
coordinator that owns it, its transaction timeout and, while a transaction
is open, when it started and the partitions in it.

An id the cluster does not know is reported on stderr and makes riffle
exit with status 1 after describing the others.`,
		Example: `  riffle txn describe payments-tx-0
  riffle txn describe payments-tx-0 payments-tx-1 -o json`,
		Args: cobra.MinimumNArgs(1),
	}
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		seen := map[string]bool{}
		for _, id := range args {
			switch {
			case strings.TrimSpace(id) == "":
				return usageErrorf("empty transactional id")
			case seen[id]:
				return usageErrorf("transactional id %q given twice", id)
			}
			seen[id] = true
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		descs, err := cl.Admin().DescribeTransactions(a.context(), args...)
		if err != nil {
			return fmt.Errorf("describing transactions: %w", err)
		}
		out := make([]txnDescriptionJSON, len(descs))
		for i, d := range descs {
			out[i] = txnDescriptionToJSON(d)
		}
		if *output == outputJSON {
			if err := writeJSON(a.stdout, out); err != nil {
				return err
			}
		} else {
			printTxnDescriptions(a.stdout, out, time.Now())
		}
		return reportItems(a, descs,
			func(d riffle.TransactionDescription) (string, error) {
				return fmt.Sprintf("transactional id %q", d.TransactionalID), d.Err
			}, nil)
	}
	return cmd
}

func txnDescriptionToJSON(d riffle.TransactionDescription) txnDescriptionJSON {
	j := txnDescriptionJSON{
		TransactionalID: d.TransactionalID, State: d.State, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
		Coordinator: d.Coordinator, TimeoutMS: d.Timeout.Milliseconds(), Partitions: map[string][]int32{},
		Error: errText(d.Err),
	}
	if !d.StartTime.IsZero() {
		s := d.StartTime.UTC().Format(jsonTime)
		j.StartTime = &s
	}
	for _, tp := range d.Partitions {
		j.Partitions[tp.Topic] = append(j.Partitions[tp.Topic], tp.Partition)
	}
	return j
}

func printTxnDescriptions(w io.Writer, txns []txnDescriptionJSON, now time.Time) {
	first := true
	for _, t := range txns {
		if t.Error != "" {
			continue // reported on stderr
		}
		if !first {
			fmt.Fprintln(w)
		}
		first = false
		coordinator := "unknown"
		if t.Coordinator >= 0 {
			coordinator = fmt.Sprint(t.Coordinator)
		}
		started := "-"
		if t.StartTime != nil {
			started = *t.StartTime
			if at, err := time.Parse(jsonTime, *t.StartTime); err == nil {
				started += fmt.Sprintf(" (%s ago)", now.Sub(at).Round(time.Second))
			}
		}
		fmt.Fprintf(w, "Transactional id:  %s\n", t.TransactionalID)
		fmt.Fprintf(w, "State:             %s\n", orDash(t.State))
		fmt.Fprintf(w, "Producer:          id %d, epoch %d\n", t.ProducerID, t.ProducerEpoch)
		fmt.Fprintf(w, "Coordinator:       %s\n", coordinator)
		fmt.Fprintf(w, "Timeout:           %s\n", time.Duration(t.TimeoutMS)*time.Millisecond)
		fmt.Fprintf(w, "Started:           %s\n", started)
		fmt.Fprintf(w, "Partitions:        %s\n", assignedText(t.Partitions))
	}
}

// ---- txn producers ----

type partitionProducersJSON struct {
	Topic     string              `json:"topic"`
	Partition int32               `json:"partition"`
	Producers []producerStateJSON `json:"producers"`
	Error     string              `json:"error,omitempty"`
}

type producerStateJSON struct {
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
	// LastSequence is -1 when unknown.
	LastSequence int32 `json:"last_sequence"`
	// LastTimestamp is null when unknown.
	LastTimestamp    *string `json:"last_timestamp"`
	CoordinatorEpoch int32   `json:"coordinator_epoch"`
	// TxnStartOffset is the first offset of the producer's open
	// transaction on the partition; null when it has none.
	TxnStartOffset *int64 `json:"txn_start_offset"`
}

func (a *app) txnProducersCmd() *cobra.Command {
	var partitions []int32
	cmd := &cobra.Command{
		Use:   "producers TOPIC",
		Short: "Show the producers active on the partitions of a topic",
		Long: `Show, for every partition of a topic (or those given with -p), the
producers its leader keeps state for: producer id and epoch, last sequence
number and timestamp, and the offset where the producer's open transaction
started ("-" when it has none). A producer whose transaction stays open
holds read_committed consumers of the partition back at that offset.

A partition whose producers cannot be listed is reported on stderr and
makes riffle exit with status 1.`,
		Example: `  riffle txn producers payments
  riffle txn producers payments -p 0,3 -o json`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().Int32SliceVarP(&partitions, "partitions", "p", nil, "only these `PARTITIONS` (comma-separated)")
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		topic := args[0]
		if strings.TrimSpace(topic) == "" {
			return usageErrorf("empty topic name")
		}
		for _, p := range partitions {
			if p < 0 {
				return usageErrorf("-p %d: partitions are not negative", p)
			}
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		ctx := a.context()
		if len(partitions) == 0 {
			details, err := cl.Admin().ListTopics(ctx, topic)
			if err != nil {
				return fmt.Errorf("describing topic %q: %w", topic, err)
			}
			if len(details) != 1 || details[0].Err != nil {
				e := riffle.ErrUnknownTopicOrPartition
				if len(details) == 1 {
					e = details[0].Err
				}
				return fmt.Errorf("topic %q: %w", topic, e)
			}
			for _, p := range details[0].Partitions {
				partitions = append(partitions, p.Partition)
			}
		}
		sort.Slice(partitions, func(i, j int) bool { return partitions[i] < partitions[j] })
		tps := make([]riffle.TopicPartition, len(partitions))
		for i, p := range partitions {
			tps[i] = riffle.TopicPartition{Topic: topic, Partition: p}
		}
		res, err := cl.Admin().DescribeProducers(ctx, tps...)
		if err != nil {
			return fmt.Errorf("describing producers of %q: %w", topic, err)
		}
		out := make([]partitionProducersJSON, len(res))
		for i, r := range res {
			out[i] = partitionProducersToJSON(r)
		}
		if *output == outputJSON {
			if err := writeJSON(a.stdout, out); err != nil {
				return err
			}
		} else {
			printProducers(a.stdout, out)
		}
		return reportItems(a, res,
			func(r riffle.PartitionProducers) (string, error) { return r.TopicPartition.String(), r.Err }, nil)
	}
	return cmd
}

func partitionProducersToJSON(r riffle.PartitionProducers) partitionProducersJSON {
	j := partitionProducersJSON{Topic: r.Topic, Partition: r.Partition, Producers: []producerStateJSON{}, Error: errText(r.Err)}
	for _, p := range r.Producers {
		pj := producerStateJSON{
			ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, LastSequence: p.LastSequence,
			CoordinatorEpoch: p.CoordinatorEpoch,
		}
		if !p.LastTimestamp.IsZero() {
			s := p.LastTimestamp.UTC().Format(jsonTime)
			pj.LastTimestamp = &s
		}
		if p.CurrentTxnStartOffset >= 0 {
			o := p.CurrentTxnStartOffset
			pj.TxnStartOffset = &o
		}
		j.Producers = append(j.Producers, pj)
	}
	return j
}

// printProducers prints one row per producer; partitions without any are
// left out, failed ones are reported on stderr.
func printProducers(w io.Writer, parts []partitionProducersJSON) {
	tw := newTable(w)
	row(tw, "TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP", "TXN-START-OFFSET")
	for _, p := range parts {
		for _, pr := range p.Producers {
			ts, start := "-", "-"
			if pr.LastTimestamp != nil {
				ts = *pr.LastTimestamp
			}
			if pr.TxnStartOffset != nil {
				start = fmt.Sprint(*pr.TxnStartOffset)
			}
			row(tw, p.Topic, p.Partition, pr.ProducerID, pr.ProducerEpoch, pr.LastSequence, ts, start)
		}
	}
	tw.Flush()
}
