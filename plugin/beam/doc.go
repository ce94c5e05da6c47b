// Package riffbeam reads and writes Kafka natively from Apache Beam Go
// pipelines, through Riffle: no Java expansion service, no cross-language
// transform.
//
// A pipeline that reads a topic, counts its values and writes the counts
// to another topic, committing what it read to a consumer group:
//
//	p, s := beam.NewPipelineWithRoot()
//	records := riffbeam.Read(s, brokers, []string{"events"}, riffbeam.Group("colors"), riffbeam.CommitOffsets())
//	counts := stats.Count(s, beam.ParDo(s, valueOf, records))
//	riffbeam.Write(s, brokers, "counts", beam.ParDo(s, countRecord, counts))
//	if _, err := beam.Run(ctx, "prism", p); err != nil {
//		log.Fatal(err)
//	}
//
// [Read] is a splittable DoFn whose restrictions are offset ranges of
// partitions. A bounded read plans every partition once, when the
// pipeline starts, from a consumer group's committed offsets (or a start
// spec) to the high watermark, through [ranges.Planner]; an unbounded
// read ([Unbounded]) keeps reading with process continuations, estimates
// the watermark from record timestamps and picks up partitions added to
// the topics while it runs. Runners may split a restriction while it is
// read (dynamic splitting): every offset is still read exactly once per
// successful bundle. With [CommitOffsets] the offsets read are committed
// to the group when the runner finalizes a bundle, through a
// [ranges.Checkpoint], so lag tools see the pipeline's progress.
//
// [Write] produces a PCollection of [Record] with Riffle's idempotent
// producer, flushed when a bundle finishes; a record that cannot be
// written fails its bundle.
//
// Each DoFn instance opens one [riffle.Client] in Setup (and, for reads,
// one [ranges.Reader] it reuses for every restriction) and closes it in
// Teardown. Options that cannot travel with the pipeline (TLS, SASL,
// loggers) are registered by name in the worker binary with
// [RegisterClientOptions] and named with [ReadClientOptions] and
// [WriteClientOptions].
package riffbeam
