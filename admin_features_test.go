package riffle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func finalizedLevel(t *testing.T, ctx context.Context, adm *Admin, feature string) int16 {
	t.Helper()
	fm, err := adm.DescribeFeatures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return fm.Finalized[feature].Max
}

// UpdateFeatures (v2, all or nothing: one top-level error is every
// feature's) and its validate-only form: the request carries the levels,
// upgrade types and ValidateOnly; validating changes nothing, updating
// does; a refused downgrade fails every feature of the request; a
// NOT_CONTROLLER answer is retried; an update without an upgrade type is
// refused locally.
func TestAdminUpdateFeatures(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const tv = "transaction.version"
	level := finalizedLevel(t, ctx, adm, tv)
	if level < 2 {
		t.Fatalf("kfake's %s is %d, want 2 or more", tv, level)
	}
	var sent []*kmsg.UpdateFeaturesRequest
	fake.ControlKey(int16(kmsg.UpdateFeatures), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		sent = append(sent, kr.(*kmsg.UpdateFeaturesRequest))
		return nil, nil, false
	})

	res, err := adm.ValidateOnly().UpdateFeatures(ctx, map[string]FeatureUpdate{tv: {MaxVersionLevel: level - 1, UpgradeType: FeatureSafeDowngrade}})
	if err != nil || len(res) != 1 || res[0].Feature != tv || res[0].Err != nil {
		t.Fatalf("validating a safe downgrade: %v %v", res, err)
	}
	if got := finalizedLevel(t, ctx, adm, tv); got != level {
		t.Fatalf("validating changed %s to %d", tv, got)
	}
	if len(sent) != 1 || !sent[0].ValidateOnly || len(sent[0].FeatureUpdates) != 1 {
		t.Fatalf("requests %+v", sent)
	}
	if fu := sent[0].FeatureUpdates[0]; fu.Feature != tv || fu.MaxVersionLevel != level-1 || fu.UpgradeType != 2 {
		t.Fatalf("the update sent: %+v", fu)
	}

	// The same as an upgrade: refused, for every feature of the request.
	res, err = adm.UpdateFeatures(ctx, map[string]FeatureUpdate{
		tv:              {MaxVersionLevel: level - 1, UpgradeType: FeatureUpgrade},
		"group.version": {MaxVersionLevel: finalizedLevel(t, ctx, adm, "group.version"), UpgradeType: FeatureUpgrade},
	})
	if err != nil || len(res) != 2 || res[0].Feature != "group.version" || res[1].Feature != tv ||
		!errors.Is(res[0].Err, ErrInvalidUpdateVersion) || !errors.Is(res[1].Err, ErrInvalidUpdateVersion) {
		t.Fatalf("a downgrade as an upgrade: %v %v, want INVALID_UPDATE_VERSION for both, sorted", res, err)
	}
	if err := res.Err(); !errors.Is(err, ErrInvalidUpdateVersion) {
		t.Fatalf("Err() = %v", err)
	}

	// For real, after a NOT_CONTROLLER.
	fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.UpdateFeatures}, TopLevel: true, Err: kerr.NotController})
	sent = nil
	res, err = adm.UpdateFeatures(ctx, map[string]FeatureUpdate{tv: {MaxVersionLevel: level - 1, UpgradeType: FeatureUnsafeDowngrade}})
	if err != nil || res.Err() != nil {
		t.Fatalf("downgrading: %v %v", res, err)
	}
	if len(sent) != 2 || sent[1].ValidateOnly || sent[1].FeatureUpdates[0].UpgradeType != 3 {
		t.Fatalf("requests %+v, want the one refused and its retry", sent)
	}
	if got := finalizedLevel(t, ctx, adm, tv); got != level-1 {
		t.Fatalf("%s is %d after the downgrade, want %d", tv, got, level-1)
	}

	sent = nil
	for _, u := range []FeatureUpdate{{MaxVersionLevel: 1}, {MaxVersionLevel: -1, UpgradeType: FeatureUpgrade}, {MaxVersionLevel: 1, UpgradeType: 7}} {
		if _, err := adm.UpdateFeatures(ctx, map[string]FeatureUpdate{tv: u}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("update %+v: %v, want ErrInvalidConfig", u, err)
		}
	}
	if _, err := adm.UpdateFeatures(ctx, map[string]FeatureUpdate{"": {MaxVersionLevel: 1, UpgradeType: FeatureUpgrade}}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("no feature name: %v, want ErrInvalidConfig", err)
	}
	if len(sent) != 0 {
		t.Errorf("invalid updates were sent: %+v", sent)
	}
	if res, err := adm.UpdateFeatures(ctx, nil); err != nil || len(res) != 0 {
		t.Errorf("no updates: %v %v", res, err)
	}
}

// Before v2 the controller answered per feature; a top-level error is
// still every feature's; a validate-only update is not sent as v0, which
// has no ValidateOnly.
func TestAdminUpdateFeaturesPerFeature(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), MaxVersions(int16(kmsg.UpdateFeatures), 1))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	level := finalizedLevel(t, ctx, adm, "transaction.version")
	res, err := adm.ValidateOnly().UpdateFeatures(ctx, map[string]FeatureUpdate{
		"transaction.version": {MaxVersionLevel: level, UpgradeType: FeatureUpgrade},
		"no.such.feature":     {MaxVersionLevel: 1, UpgradeType: FeatureUpgrade},
	})
	if err != nil || len(res) != 2 || res[0].Feature != "no.such.feature" || !errors.Is(res[0].Err, ErrFeatureUpdateFailed) ||
		res[1].Err != nil {
		t.Fatalf("per feature: %v %v, want kfake's FEATURE_UPDATE_FAILED for the unknown feature only", res, err)
	}

	fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.UpdateFeatures}, TopLevel: true, Err: kerr.ClusterAuthorizationFailed})
	res, err = adm.UpdateFeatures(ctx, map[string]FeatureUpdate{"transaction.version": {MaxVersionLevel: level, UpgradeType: FeatureUpgrade}})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, ErrClusterAuthorization) {
		t.Fatalf("a top-level error: %v %v, want CLUSTER_AUTHORIZATION_FAILED for the feature", res, err)
	}

	v0 := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), MaxVersions(int16(kmsg.UpdateFeatures), 0))
	if _, err := v0.Admin().ValidateOnly().UpdateFeatures(ctx, map[string]FeatureUpdate{"transaction.version": {MaxVersionLevel: 0, UpgradeType: FeatureSafeDowngrade}}); !errors.Is(err, errs.ErrUnsupported) {
		t.Fatalf("validating on v0: %v, want ErrUnsupported", err)
	}
	if got := finalizedLevel(t, ctx, adm, "transaction.version"); got != level {
		t.Fatalf("transaction.version %d after validating on v0, want %d", got, level)
	}
}
