package crash_test

import (
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// TestLeaderCrashes runs every scenario at once, (a) producing, (b)
// consumer groups (classic and KIP-848), (c) exactly-once pipelines
// (riffle.ExactlyOnce and process.ExactlyOnce), (d) a share group, while
// the chaos loop SIGKILLs three times the node leading most of the
// scenarios' partitions and restarts it (chaos: each kill waits until the
// leadership moved, the node is back in every ISR and the preferred
// leaders are elected again, so every kill takes about a third of each
// topic's partitions). One cluster and one set of kills for all of them
// keeps the package's run within a few minutes on two cores. Each
// scenario then drains and checks in a subtest of its own, and logs its
// accounting line.
func TestLeaderCrashes(t *testing.T) {
	need(t)
	admin := client(t)
	healthy(t, admin)

	produceTopic := topic(t, admin, "produce", 6)
	groupTopic := topic(t, admin, "group", 6)
	eosIn := topic(t, admin, "eos-in", 3)
	eosOut1 := topic(t, admin, "eos-out-consumer", 3)
	eosOut2 := topic(t, admin, "eos-out-process", 3)
	shareTopic := topic(t, admin, "share", 3)
	all := []string{produceTopic, groupTopic, eosIn, eosOut1, eosOut2, shareTopic}
	// Every topic known to every node before the clients start.
	must(t, "topics created", awaitInSync(timeout(t, time.Minute), admin, time.Minute))

	prod := startProduce(t, client(t), produceTopic)
	groupFeed := newFeeder(t, client(t), groupTopic, "g", 1)
	classic := startGroup(t, riffle.GroupProtocolClassic, "classic", groupTopic)
	consumer := startGroup(t, riffle.GroupProtocolConsumer, "consumer", groupTopic)
	eosFeed := newFeeder(t, client(t), eosIn, "e", 1)
	eosConsumer := startEOS(t, "consumer", eosIn, eosOut1)
	eosProcess := startEOS(t, "process", eosIn, eosOut2)
	shareFeed := newFeeder(t, client(t), shareTopic, "s", 1)
	share := startShare(t, admin, shareTopic)

	began := time.Now()
	ws := []watched{prod, classic, consumer, eosConsumer, eosProcess, share}
	kills := chaos(t, admin, 3, 2*time.Second, ws, all...)
	t.Logf("chaos: %d kills in %v", len(kills), time.Since(began).Round(time.Second))

	groupWant := groupFeed.finish()
	eosWant := eosFeed.finish()
	shareWant := shareFeed.finish()
	t.Run("produce", func(t *testing.T) { prod.finish(t, admin, kills) })
	t.Run("group-classic", func(t *testing.T) { classic.finish(t, groupWant, kills) })
	t.Run("group-consumer", func(t *testing.T) { consumer.finish(t, groupWant, kills) })
	t.Run("eos-consumer", func(t *testing.T) { eosConsumer.finish(t, admin, eosWant, kills) })
	t.Run("eos-process", func(t *testing.T) { eosProcess.finish(t, admin, eosWant, kills) })
	t.Run("share", func(t *testing.T) { share.finish(t, admin, shareWant, kills) })
}
