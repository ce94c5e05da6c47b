package ranges_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/ranges"
	"github.com/riffle-go/riffle/rifftest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReaderFollowerFetching (KIP-392): a Reader whose client has a Rack
// reads from the replica the leader names for that rack, keeps reading
// there (the leader is asked once), and goes back to the leader, without
// its rack, when the replica fails. kfake names no preferred replica, so
// a control function answers for the leader as Kafka's rack-aware
// selector does: no records, the replica named. The replica is a kfake
// follower allowed to serve the partition.
func TestReaderFollowerFetching(t *testing.T) {
	c, cl := setup(t, rifftest.Brokers(3), rifftest.Topic("t", 1))
	produce(t, cl, "t", 0, 500, nil)
	kf := c.Kfake()
	leader := kf.LeaderFor("t", 0)
	follower := (leader + 1) % 3
	kf.SetFollowers("t", 0, []int32{follower})

	type fetchSeen struct {
		node int32
		rack string
	}
	var (
		mu         sync.Mutex
		seen       []fetchSeen
		failFollow bool
		lagFollow  bool       // the follower has none of the records yet
		name       = follower // the replica the leader names
	)
	kf.ControlKey(kmsg.Fetch.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		node := kf.CurrentNode()
		mu.Lock()
		seen = append(seen, fetchSeen{node, req.Rack})
		fail, lag, named := failFollow, lagFollow, name
		mu.Unlock()
		// answer builds the response for every requested partition.
		answer := func(edit func(*kmsg.FetchResponseTopicPartition)) (kmsg.Response, error, bool) {
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			for _, rt := range req.Topics {
				st := kmsg.NewFetchResponseTopic()
				st.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					sp := kmsg.NewFetchResponseTopicPartition()
					sp.Partition = rp.Partition
					edit(&sp)
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		}
		switch {
		case node == leader && req.Rack == "rb":
			return answer(func(sp *kmsg.FetchResponseTopicPartition) {
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = 500, 500, 0
				sp.PreferredReadReplica = named
			})
		case node == follower && fail:
			return answer(func(sp *kmsg.FetchResponseTopicPartition) {
				sp.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER: no longer a replica
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			})
		case node == follower && lag:
			return answer(func(sp *kmsg.FetchResponseTopicPartition) {
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = 0, 0, 0 // no error, no records
			})
		}
		return nil, nil, false
	})
	count := func() (leaderRack, leaderNoRack, fromFollower int) {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range seen {
			switch {
			case f.node == leader && f.rack == "rb":
				leaderRack++
			case f.node == leader:
				leaderNoRack++
			case f.node == follower:
				fromFollower++
			}
		}
		seen = seen[:0]
		return
	}
	exact := func(r *ranges.Reader, low, high int64) {
		t.Helper()
		offs, err := collect(t, r, ranges.Range{Topic: "t", Partition: 0, Low: low, High: high})
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(offs)) != high-low {
			t.Fatalf("[%d, %d): %d records", low, high, len(offs))
		}
		for i, o := range offs {
			if o != low+int64(i) {
				t.Fatalf("[%d, %d): record %d has offset %d", low, high, i, o)
			}
		}
	}

	// Without a rack: the leader only.
	plain := ranges.NewReader(cl, ranges.FetchBytes(16<<10))
	defer plain.Close()
	exact(plain, 0, 500)
	if lr, ln, ff := count(); lr != 0 || ln == 0 || ff != 0 {
		t.Fatalf("without a rack: %d fetches from the leader with a rack, %d without, %d from the follower", lr, ln, ff)
	}

	rackCl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...), riffle.Rack("rb"))
	if err != nil {
		t.Fatal(err)
	}
	defer rackCl.Close()
	r := ranges.NewReader(rackCl, ranges.FetchBytes(16<<10)) // several fetches a range
	defer r.Close()
	exact(r, 0, 300)
	exact(r, 300, 500) // the preference holds across reads
	if lr, ln, ff := count(); lr != 1 || ln != 0 || ff < 2 {
		t.Fatalf("with rack rb: %d fetches from the leader with the rack (want 1), %d without (want 0), %d from the follower (want several)", lr, ln, ff)
	}

	// Reads of the partition at once, on a Reader with no preference yet:
	// each first asks the leader, which names the same replica to all;
	// only the first naming changes the shared preference, and every read
	// must still follow it.
	fresh := ranges.NewReader(rackCl, ranges.FetchBytes(16<<10))
	defer fresh.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			low := int64(i * 50)
			offs, err := collect(t, fresh, ranges.Range{Topic: "t", Partition: 0, Low: low, High: low + 100})
			if err == nil && len(offs) != 100 {
				err = fmt.Errorf("[%d, %d): %d records", low, low+100, len(offs))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent reads: %v", err)
		}
	}
	if lr, ln, ff := count(); lr == 0 || ln != 0 || ff < 8 {
		t.Fatalf("concurrent reads: %d fetches from the leader with the rack, %d without (want 0), %d from the follower (want 8 or more)", lr, ln, ff)
	}

	// Each case: a fresh Reader (no preference yet) reads the whole
	// partition while the fake misbehaves as set; want are the fetches
	// from the leader with the rack and from the follower (those from the
	// leader without the rack must be some).
	misbehaving := func(what string, set func(on bool), wantRack, wantFollower int) {
		t.Helper()
		mu.Lock()
		set(true)
		mu.Unlock()
		fresh := ranges.NewReader(rackCl, ranges.FetchBytes(16<<10))
		defer fresh.Close()
		exact(fresh, 0, 500)
		if lr, ln, ff := count(); lr != wantRack || ln == 0 || ff != wantFollower {
			t.Fatalf("%s: %d fetches from the leader with the rack (want %d), %d without (want some), %d from the follower (want %d)", what, lr, wantRack, ln, ff, wantFollower)
		}
		mu.Lock()
		set(false)
		mu.Unlock()
	}
	// The leader names a broker the metadata does not know: the read
	// cannot follow it, and asks the leader again without the rack
	// instead of asking it with the rack over and over.
	misbehaving("an unknown replica named", func(on bool) {
		name = follower
		if on {
			name = 7
		}
	}, 1, 0)
	// A replica that lags answers with no records and no error: only the
	// leader says where the data ends, so the read goes on there.
	misbehaving("a lagging replica", func(on bool) { lagFollow = on }, 1, 1)

	// The replica stops serving the partition: the read goes on at the
	// leader, which, asked without the rack, serves it.
	mu.Lock()
	failFollow = true
	mu.Unlock()
	exact(r, 0, 500)
	if lr, ln, ff := count(); ff != 1 || ln == 0 || lr != 0 {
		t.Fatalf("after the follower failed: %d fetches from the follower (want 1), %d from the leader without the rack (want some), %d with it (want 0)", ff, ln, lr)
	}
}
