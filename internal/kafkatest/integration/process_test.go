package integration_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
)

// process.ExactlyOnce (ByKey) in a group whose members change while the
// inputs flow: member 0 starts, member 1 joins, member 0 leaves (Close),
// member 2 joins. Each member has a client and a transactional producer
// of its own. A read_committed reader of the output then sees, for every
// key, exactly the outputs of its inputs, each once and in input order
// (two outputs per input), and the group's offsets end at the end of the
// input. The inputs are produced all along, until the last member has
// taken work, so every change finds records in flight.
func TestExactlyOnceProcessMembersJoinLeave(t *testing.T) {
	for _, proto := range groupProtocols {
		t.Run(proto.name, func(t *testing.T) {
			need(t)
			if !supports848(t, proto.p) {
				return
			}
			const parts, keys = 4, 10
			admin := client(t)
			in := topic(t, admin, parts, nil)
			out := topic(t, admin, parts, nil)
			group := name(t, "g")
			ctx := timeout(t, 5*time.Minute)
			p, err := riffle.NewProducer(admin, riffle.WithPartitioner(riffle.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(ctx)
			// The inputs flow until the last member took work: one
			// record per partition every 20 ms. A key lives in one
			// input partition, so its inputs have one order.
			var perPart int // records per partition once the feed stopped
			stop, fed := make(chan struct{}), make(chan error, 1)
			go func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						perPart = i
						fed <- nil
						return
					case <-time.After(20 * time.Millisecond):
					}
					var recs []*riffle.Record
					for part := range int32(parts) {
						recs = append(recs, &riffle.Record{Topic: in, Partition: part, Key: fmt.Appendf(nil, "%d-%d", part, i%keys), Value: []byte(strconv.Itoa(i))})
					}
					if err := p.ProduceSync(ctx, recs...); err != nil {
						fed <- err
						return
					}
				}
			}()
			stopFeed := func() {
				t.Helper()
				close(stop)
				if err := <-fed; err != nil {
					t.Fatal(err)
				}
			}
			var handled atomic.Int64
			var newest atomic.Int64 // handler calls of the member that joined last
			type member struct {
				id      int
				p       *process.Processor
				handled atomic.Int64
			}
			var members []*member
			var last atomic.Int32
			var whoMu sync.Mutex
			who := map[string][]string{} // input "key/value": member and offset that handled it
			join := func() {
				m := &member{id: len(members)}
				last.Store(int32(m.id))
				newest.Store(0)
				cl := client(t)
				tx := txnProducer(t, cl, name(t, fmt.Sprintf("eos%d", m.id)), riffle.TransactionTimeout(20*time.Second))
				pr, err := process.New(cl, func(ctx context.Context, r *riffle.Record) error {
					if err := process.Output(ctx,
						&riffle.Record{Topic: out, Key: r.Key, Value: append(append([]byte{}, r.Value...), "/a"...)},
						&riffle.Record{Topic: out, Key: r.Key, Value: append(append([]byte{}, r.Value...), "/b"...)}); err != nil {
						return err
					}
					if last.Load() == int32(m.id) {
						newest.Add(1)
					}
					m.handled.Add(1)
					handled.Add(1)
					whoMu.Lock()
					who[string(r.Key)+"/"+string(r.Value)] = append(who[string(r.Key)+"/"+string(r.Value)], fmt.Sprintf("member %d at %s[%d]@%d, %v", m.id, r.Topic[len(r.Topic)-8:], r.Partition, r.Offset, time.Now().Format("15:04:05.000")))
					whoMu.Unlock()
					return nil
				},
					process.ExactlyOnce(tx, riffle.CommitEvery{Interval: 100 * time.Millisecond}),
					process.Ordering(process.ByKey), process.Concurrency(16),
					process.OnError(func(err error) { t.Logf("member %d: %v", m.id, err) }),
					process.ConsumerOptions(riffle.ConsumerGroup(group), riffle.SubscribeTopics(in),
						riffle.WithGroupProtocol(proto.p), riffle.OffsetReset(riffle.ResetEarliest),
						riffle.OnGroupError(func(err error) { t.Logf("member %d: group: %v", m.id, err) })))
				if err != nil {
					t.Fatal(err)
				}
				m.p = pr
				members = append(members, m)
				t.Logf("member %d joined at %d handled", m.id, handled.Load())
			}
			closeMember := func(m *member) {
				st := m.p.Stats()
				if err := m.p.Close(ctx); err != nil {
					t.Errorf("member %d: Close: %v", m.id, err)
				}
				t.Logf("member %d left at %d handled: %d handled by it, %d transactions committed, %d aborted",
					m.id, handled.Load(), m.handled.Load(), st.TxnCommitted, st.TxnAborted)
			}
			// progress waits until the newest member handled inputs.
			progress := func(what string) {
				t.Helper()
				eventually(t, 2*time.Minute, what, func() error {
					if newest.Load() == 0 {
						return fmt.Errorf("%d handled, none by the newest member", handled.Load())
					}
					return nil
				})
			}

			join()
			progress("member 0 handling inputs")
			join()
			progress("member 1 taking work")
			closeMember(members[0])
			join()
			progress("member 2 taking work")
			stopFeed()
			total := int64(parts * perPart)
			end := endOffsets(t, admin, in)
			eventually(t, 3*time.Minute, "the group's offsets at the end of the input", func() error {
				committed, err := admin.Admin().FetchOffsets(ctx, group)
				if err != nil {
					return err
				}
				for part, off := range end {
					if got := committed[riffle.TopicPartition{Topic: in, Partition: part}].Offset; got != off {
						return fmt.Errorf("%s[%d] committed %d of %d (%d handled)", in, part, got, off, handled.Load())
					}
				}
				return nil
			})
			for _, m := range members[1:] {
				closeMember(m)
			}
			for _, m := range members {
				if m.handled.Load() == 0 {
					t.Errorf("member %d handled nothing", m.id)
				}
			}

			// Every key's outputs, read committed, in offset order of
			// the output partition its key hashes to.
			byKey := map[string][]string{}
			for _, rs := range readAll(t, admin, out, riffle.ReadCommitted) {
				for _, r := range rs {
					byKey[string(r.Key)] = append(byKey[string(r.Key)], string(r.Value))
				}
			}
			n := 0
			for part := range parts {
				for k := range keys {
					key := fmt.Sprintf("%d-%d", part, k)
					var want []string
					for i := k; i < perPart; i += keys {
						want = append(want, strconv.Itoa(i)+"/a", strconv.Itoa(i)+"/b")
					}
					got := byKey[key]
					n += len(got)
					if strings.Join(got, " ") != strings.Join(want, " ") {
						t.Errorf("key %s: %d outputs, want %d, each once in input order:\n got %v\nwant %v", key, len(got), len(want), got, want)
						whoMu.Lock()
						for i := k; i < perPart; i += keys {
							t.Logf("input %s/%d handled by %v", key, i, who[key+"/"+strconv.Itoa(i)])
						}
						whoMu.Unlock()
						for _, rs := range readAll(t, admin, out, riffle.ReadCommitted) {
							for _, r := range rs {
								if string(r.Key) == key {
									t.Logf("output %s=%s at %s[%d]@%d", key, r.Value, r.Topic[len(r.Topic)-8:], r.Partition, r.Offset)
								}
							}
						}
					}
				}
			}
			t.Logf("%d handler calls for %d inputs; %d outputs read committed", handled.Load(), total, n)
		})
	}
}
