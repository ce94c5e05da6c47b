package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/spf13/cobra"
)

// demo is the state the demo steps share. A step reads what earlier steps
// left here and adds its own results.
type demo struct {
	client *riffle.Client
	out    io.Writer // indented under the step's title

	// Settings, from the flags.
	topic       string
	partitions  int32
	replication int16 // 0: min(3, brokers), decided by the connect step

	// Results of earlier steps.
	cluster clusterJSON
}

// demoStep is one step of the demo. To add a step, write a function with
// the signature of run and add it to demoSteps at the right place.
type demoStep struct {
	// title is printed before the step runs; it may use earlier results.
	title func(d *demo) string
	// run does the step, printing its results to d.out. Methods of demo
	// fit: (*demo).createTopic.
	run func(d *demo, ctx context.Context) error
}

// demoSteps is the demo, in order.
func demoSteps() []demoStep {
	return []demoStep{
		{
			title: func(*demo) string { return "Connect to the cluster" },
			run:   (*demo).connect,
		},
		{
			title: func(d *demo) string {
				return fmt.Sprintf("Create topic %q with %d partitions, replication factor %d", d.topic, d.partitions, d.replication)
			},
			run: (*demo).createTopic,
		},
		{
			title: func(*demo) string { return "List topics" },
			run:   (*demo).listTopics,
		},
		{
			title: func(d *demo) string { return fmt.Sprintf("Describe topic %q", d.topic) },
			run:   (*demo).describeTopic,
		},
	}
}

func (d *demo) connect(ctx context.Context) error {
	c, err := describeCluster(ctx, d.client)
	if err != nil {
		return err
	}
	d.cluster = c
	if d.replication == 0 {
		d.replication = int16(min(3, len(c.Brokers)))
	}
	printCluster(d.out, c)
	return nil
}

func (d *demo) createTopic(ctx context.Context) error {
	results, err := d.client.Admin().CreateTopics(ctx, riffle.TopicSpec{
		Name: d.topic, Partitions: d.partitions, ReplicationFactor: d.replication,
	})
	if err != nil {
		return err
	}
	switch err := results.Err(); {
	case err == nil:
		fmt.Fprintf(d.out, "created topic %q\n", d.topic)
	case errors.Is(err, riffle.ErrTopicAlreadyExists):
		// Running the demo twice against the same cluster is fine.
		fmt.Fprintf(d.out, "topic %q already exists; using it\n", d.topic)
	default:
		return err
	}
	return nil
}

func (d *demo) listTopics(ctx context.Context) error {
	topics, err := listTopics(ctx, d.client, false)
	if err != nil {
		return err
	}
	printTopicList(d.out, topics)
	for _, t := range topics {
		if t.Name == d.topic {
			return nil
		}
	}
	return fmt.Errorf("topic %q is not in the list", d.topic)
}

func (d *demo) describeTopic(ctx context.Context) error {
	topics, err := describeTopics(ctx, d.client, []string{d.topic})
	if err != nil {
		return err
	}
	t := topics[0]
	if len(t.errs) > 0 {
		return errors.Join(t.errs...)
	}
	printTopicDescription(d.out, t)
	return nil
}

func (a *app) demoCmd() *cobra.Command {
	d := &demo{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Walk through what riffle can do, step by step",
		Long: `Run a short tour of riffle, printing each step and its result: connect to
the cluster and describe it, create a topic, list the topics, and describe
the new topic's partitions, offsets and configs.

Without --brokers the demo runs against an embedded cluster that goes away
when it ends. Against a real cluster the topic is left in place; remove it
with "riffle topic delete". If the topic already exists it is reused.`,
		Example: `  riffle demo
  riffle demo --topic tour -p 3
  riffle --brokers localhost:9092 demo`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&d.topic, "topic", "riffle-demo", "topic to create")
	cmd.Flags().Int32VarP(&d.partitions, "partitions", "p", 6, "partitions of the topic")
	cmd.Flags().Int16VarP(&d.replication, "replication", "r", 0, "replication factor (0: up to 3, as many as there are brokers)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if d.topic == "" {
			return usageErrorf("--topic is empty")
		}
		if d.partitions < 1 {
			return usageErrorf("--partitions must be positive, got %d", d.partitions)
		}
		if d.replication < 0 {
			return usageErrorf("--replication must not be negative, got %d", d.replication)
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		d.client = cl
		return runDemo(a.context(), a.stdout, d, demoSteps())
	}
	return cmd
}

// runDemo runs the steps in order, stopping at the first failure.
func runDemo(ctx context.Context, w io.Writer, d *demo, steps []demoStep) error {
	start := time.Now()
	d.out = newIndentWriter(w, "      ")
	for i, s := range steps {
		title := s.title(d)
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "[%d/%d] %s\n", i+1, len(steps), title)
		t0 := time.Now()
		if err := s.run(d, ctx); err != nil {
			return fmt.Errorf("demo step %d/%d (%s): %w", i+1, len(steps), title, err)
		}
		fmt.Fprintf(d.out, "(%s)\n", roundDuration(time.Since(t0)))
	}
	fmt.Fprintf(w, "\nDemo complete: %d steps in %s.\n", len(steps), roundDuration(time.Since(start)))
	return nil
}

// roundDuration keeps durations readable: 1.234ms, 56ms, 1.2s.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond)
	case d < time.Second:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(10 * time.Millisecond)
}
