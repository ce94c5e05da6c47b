package integration_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// Feature level updates as Kafka 4.4's controller answers them. Validating
// only: a safe or unsafe downgrade of transaction.version (even to 0) and
// an upgrade to the level in force pass; a downgrade asked as an upgrade,
// a level above what the brokers support, any metadata.version downgrade
// and an unknown feature get INVALID_UPDATE_VERSION, and one bad update
// fails every feature of the request (all or nothing, UpdateFeatures v2).
// Nothing changes. For real: streams.version (no test uses streams
// groups) goes down to 0 and back, and every broker reports each level.
func TestUpdateFeatures(t *testing.T) {
	need(t)
	cl := client(t)
	adm := cl.Admin()
	ctx := timeout(t, 2*time.Minute)
	before, err := adm.DescribeFeatures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if is39() {
		updateFeatures39(t, adm, before)
		return
	}
	tv, mv := before.Finalized["transaction.version"].Max, before.Finalized["metadata.version"].Max
	if tv < 1 || mv < 1 {
		t.Fatalf("finalized features %v: want transaction.version and metadata.version", before.Finalized)
	}
	vo := adm.ValidateOnly()
	for _, c := range []struct {
		feature string
		update  riffle.FeatureUpdate
		ok      bool
	}{
		{"transaction.version", riffle.FeatureUpdate{MaxVersionLevel: tv - 1, UpgradeType: riffle.FeatureSafeDowngrade}, true},
		{"transaction.version", riffle.FeatureUpdate{MaxVersionLevel: tv - 1, UpgradeType: riffle.FeatureUnsafeDowngrade}, true},
		{"transaction.version", riffle.FeatureUpdate{MaxVersionLevel: 0, UpgradeType: riffle.FeatureSafeDowngrade}, true},
		{"transaction.version", riffle.FeatureUpdate{MaxVersionLevel: tv, UpgradeType: riffle.FeatureUpgrade}, true},
		{"transaction.version", riffle.FeatureUpdate{MaxVersionLevel: tv - 1, UpgradeType: riffle.FeatureUpgrade}, false},
		{"transaction.version", riffle.FeatureUpdate{MaxVersionLevel: before.Supported["transaction.version"].Max + 1, UpgradeType: riffle.FeatureUpgrade}, false},
		{"metadata.version", riffle.FeatureUpdate{MaxVersionLevel: mv - 1, UpgradeType: riffle.FeatureSafeDowngrade}, false},
		{"metadata.version", riffle.FeatureUpdate{MaxVersionLevel: mv - 1, UpgradeType: riffle.FeatureUnsafeDowngrade}, false},
		{"no.such.feature", riffle.FeatureUpdate{MaxVersionLevel: 1, UpgradeType: riffle.FeatureUpgrade}, false},
	} {
		res, err := vo.UpdateFeatures(ctx, map[string]riffle.FeatureUpdate{c.feature: c.update})
		if err != nil || len(res) != 1 || res[0].Feature != c.feature {
			t.Fatalf("validating %s %+v: %v %v", c.feature, c.update, res, err)
		}
		if c.ok && res[0].Err != nil || !c.ok && !errors.Is(res[0].Err, riffle.ErrInvalidUpdateVersion) {
			t.Errorf("validating %s to %d (%v): %v, want ok=%v or INVALID_UPDATE_VERSION", c.feature, c.update.MaxVersionLevel, c.update.UpgradeType, res[0].Err, c.ok)
		}
	}
	res, err := vo.UpdateFeatures(ctx, map[string]riffle.FeatureUpdate{
		"transaction.version": {MaxVersionLevel: tv - 1, UpgradeType: riffle.FeatureSafeDowngrade},
		"no.such.feature":     {MaxVersionLevel: 1, UpgradeType: riffle.FeatureUpgrade},
	})
	if err != nil || len(res) != 2 || res[0].Feature != "no.such.feature" || res[1].Feature != "transaction.version" ||
		!errors.Is(res[0].Err, riffle.ErrInvalidUpdateVersion) || !errors.Is(res[1].Err, riffle.ErrInvalidUpdateVersion) {
		t.Errorf("validating a good and a bad update: %v %v, want both INVALID_UPDATE_VERSION, sorted", res, err)
	}
	if _, err := vo.UpdateFeatures(ctx, map[string]riffle.FeatureUpdate{"transaction.version": {MaxVersionLevel: 1}}); !errors.Is(err, riffle.ErrInvalidConfig) {
		t.Errorf("an update without an upgrade type: %v, want ErrInvalidConfig", err)
	}
	now, err := adm.DescribeFeatures(ctx)
	if err != nil || now.Finalized["transaction.version"].Max != tv || now.Finalized["metadata.version"].Max != mv {
		t.Errorf("after validating only: %v %v, want transaction.version %d, metadata.version %d", now.Finalized, err, tv, mv)
	}

	// A real update: streams.version down to 0 (the feature is then no
	// longer finalized) and back.
	sv, ok := before.Finalized["streams.version"]
	if !ok || sv.Max < 1 {
		t.Fatalf("finalized features %v: want streams.version", before.Finalized)
	}
	everyBroker := func(want int16) func() error {
		return func() error {
			for _, n := range env.addrs {
				bc, err := riffle.NewClient(riffle.SeedBrokers(n))
				if err != nil {
					return err
				}
				fm, err := bc.Admin().DescribeFeatures(ctx)
				bc.Close()
				if err != nil {
					return err
				}
				if got := fm.Finalized["streams.version"].Max; got != want {
					return fmt.Errorf("broker %s: streams.version %d (finalized %v)", n, got, fm.Finalized)
				}
			}
			return nil
		}
	}
	t.Cleanup(func() {
		_, _ = adm.UpdateFeatures(timeout(t, 30*time.Second), map[string]riffle.FeatureUpdate{"streams.version": {MaxVersionLevel: sv.Max, UpgradeType: riffle.FeatureUpgrade}})
	})
	res, err = adm.UpdateFeatures(ctx, map[string]riffle.FeatureUpdate{"streams.version": {MaxVersionLevel: 0, UpgradeType: riffle.FeatureSafeDowngrade}})
	if err != nil || res.Err() != nil {
		t.Fatalf("streams.version to 0: %v %v", res, err)
	}
	eventually(t, time.Minute, "streams.version 0 on every broker", everyBroker(0))
	res, err = adm.UpdateFeatures(ctx, map[string]riffle.FeatureUpdate{"streams.version": {MaxVersionLevel: sv.Max, UpgradeType: riffle.FeatureUpgrade}})
	if err != nil || res.Err() != nil {
		t.Fatalf("streams.version back to %d: %v %v", sv.Max, res, err)
	}
	eventually(t, time.Minute, fmt.Sprintf("streams.version %d on every broker", sv.Max), everyBroker(sv.Max))
}

// updateFeatures39 is TestUpdateFeatures on Kafka 3.9, which finalizes
// metadata.version only (UpdateFeatures v1): validating the level in force
// and a safe or unsafe downgrade by one passes; a downgrade asked as an
// upgrade, a level above the supported range and an unknown feature are
// refused; nothing changes.
func updateFeatures39(t *testing.T, adm *riffle.Admin, before riffle.FeatureMetadata) {
	ctx := timeout(t, time.Minute)
	mv := before.Finalized["metadata.version"].Max
	if mv < 1 {
		t.Fatalf("finalized features %v: want metadata.version", before.Finalized)
	}
	vo := adm.ValidateOnly()
	for _, c := range []struct {
		feature string
		update  riffle.FeatureUpdate
		ok      bool
	}{
		{"metadata.version", riffle.FeatureUpdate{MaxVersionLevel: mv, UpgradeType: riffle.FeatureUpgrade}, true},
		// Kafka 3.9 validates a metadata.version downgrade (4.4 refuses
		// every one).
		{"metadata.version", riffle.FeatureUpdate{MaxVersionLevel: mv - 1, UpgradeType: riffle.FeatureSafeDowngrade}, true},
		{"metadata.version", riffle.FeatureUpdate{MaxVersionLevel: mv - 1, UpgradeType: riffle.FeatureUnsafeDowngrade}, true},
		{"metadata.version", riffle.FeatureUpdate{MaxVersionLevel: mv - 1, UpgradeType: riffle.FeatureUpgrade}, false},
		{"metadata.version", riffle.FeatureUpdate{MaxVersionLevel: before.Supported["metadata.version"].Max + 1, UpgradeType: riffle.FeatureUpgrade}, false},
		{"no.such.feature", riffle.FeatureUpdate{MaxVersionLevel: 1, UpgradeType: riffle.FeatureUpgrade}, false},
	} {
		res, err := vo.UpdateFeatures(ctx, map[string]riffle.FeatureUpdate{c.feature: c.update})
		if err != nil || len(res) != 1 || res[0].Feature != c.feature {
			t.Fatalf("validating %s %+v: %v %v", c.feature, c.update, res, err)
		}
		if c.ok && res[0].Err != nil || !c.ok && !errors.Is(res[0].Err, riffle.ErrInvalidUpdateVersion) {
			t.Errorf("validating %s to %d (%v): %v, want ok=%v", c.feature, c.update.MaxVersionLevel, c.update.UpgradeType, res[0].Err, c.ok)
		}
		t.Logf("validating %s to %d (%v): %v", c.feature, c.update.MaxVersionLevel, c.update.UpgradeType, res[0].Err)
	}
	now, err := adm.DescribeFeatures(ctx)
	if err != nil || now.Finalized["metadata.version"].Max != mv {
		t.Errorf("after validating only: %v %v, want metadata.version %d", now.Finalized, err, mv)
	}
}
