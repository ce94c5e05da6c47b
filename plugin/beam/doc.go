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
// the topics while it runs (from their earliest offset, or where
// [NewPartitionsStartLatest] or [NewPartitionsStartTime] says). Runners may split a restriction while it is
// read (dynamic splitting): every offset is still read exactly once per
// successful bundle. With [CommitOffsets] the offsets read are committed
// to the group when the runner finalizes a bundle, through a
// [ranges.Checkpoint], so lag tools see the pipeline's progress (Offset
// commits, below, says what holds).
//
// # Offset commits
//
// With [CommitOffsets], each worker process keeps one [ranges.Checkpoint]
// per group, shared by its read DoFn instances while any of them lives.
// When the runner finalizes a bundle, the ranges the bundle read are
// marked done there, and the checkpoint commits, per partition, the offset
// below which every offset is done. Within one run, with nothing else
// committing to the group, this holds:
//
//   - No skip. The group's offset passes an offset only once a finalized
//     bundle read it, or the offset is gone (retention deleted it before
//     it was read, which is logged), or the read stopped before it
//     ([Until], a drain). Beam finalizes a bundle only after the runner
//     made its output durable, so a run that fails, is cancelled or
//     retries bundles leaves the group where the next run reads again
//     whatever was not finalized: at least once.
//   - No going back. A process commits a partition only when its own
//     offset moved, and that offset moves only through ranges finalized in
//     that process, from where the group stood when the process first
//     committed the partition; a bundle is finalized once, so no process
//     commits below another's earlier commit. The plan commits only the
//     starting offsets the group has no offset for (pinning the start
//     spec) or whose offset retention passed, never a copy of the group's
//     own. The exception: offsets that
//     retention deletes during the run, unread, count as done in every
//     process that finds them gone, so a process that first commits such a
//     partition may commit its log start over a later offset.
//   - Lag across processes. A process never commits past a range that
//     another process finalized. When a runner spreads one partition over
//     several worker processes (SplitSize, dynamic splits, an unbounded
//     read resumed on another worker), each process's offset for it stops
//     at the first such range above where it started, for as long as that
//     process's checkpoint lives; the group shows the last commit any
//     process made. What was read past it is read again by the next run.
//     A runner with one worker process (Prism, as the tests run it) does
//     not lag.
//   - Failed commits. A commit that fails (a timeout,
//     [riffle.ErrGroupActive]) fails its finalization callback: the SDK
//     reports it to the runner, which may finalize again (Prism only logs
//     it). Either way the ranges stay done in the checkpoint, and every
//     commit sends each partition whose offset moved since its last
//     successful commit, so the process's next finalization, whatever
//     partition of the group it is about, commits them too. When the
//     last read instance of the process is torn down, the checkpoint
//     commits once more (within [CommitTimeout]), so a failed last
//     finalization commit is retried then; runners may skip Teardown,
//     and if that commit fails too it is logged and the group lags
//     until the next run. So do ranges whose finalization comes
//     after the callback expired (10 minutes): they are never marked done.
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
