package riffle

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Feature updates (KIP-584, KIP-778): raise or lower the cluster's
// finalized feature levels (metadata.version, transaction.version,
// group.version, share.version, ...), which DescribeFeatures shows. The
// controller checks each update against the levels every broker
// supports and the features' dependencies, and applies all of them or
// none.

// Errors of UpdateFeatures.
var (
	// ErrInvalidUpdateVersion (INVALID_UPDATE_VERSION) answers a feature
	// update the controller refuses: a level outside the range every
	// broker supports, a downgrade asked as an upgrade, a
	// metadata.version downgrade (Kafka 4.4 refuses them, safe or
	// unsafe), a level the feature's dependencies do not allow, or
	// (Kafka 4.4) a feature it does not know. The error's message says
	// which.
	ErrInvalidUpdateVersion = kafkaerr.ForCode(kafkaerr.InvalidUpdateVersion)
	// ErrFeatureUpdateFailed (FEATURE_UPDATE_FAILED) answers a feature
	// update the controller could not apply for another reason (kfake
	// answers it for an unknown feature).
	ErrFeatureUpdateFailed = kafkaerr.ForCode(kafkaerr.FeatureUpdateFailed)
)

// FeatureUpgradeType says how a feature update may change the level
// (Java's FeatureUpdate.UpgradeType).
type FeatureUpgradeType int8

// FeatureUpgrade only raises the level (the same level is no change); a
// lower level fails with ErrInvalidUpdateVersion. The upgrade types'
// values are the protocol's.
const FeatureUpgrade FeatureUpgradeType = 1

// FeatureSafeDowngrade lowers the level when no metadata is lost by it;
// the controller refuses a downgrade that would lose some.
const FeatureSafeDowngrade FeatureUpgradeType = 2

// FeatureUnsafeDowngrade lowers the level even if metadata is lost (Kafka
// 4.4 still refuses it for metadata.version).
const FeatureUnsafeDowngrade FeatureUpgradeType = 3

// String is the type's name in Java (UPGRADE, SAFE_DOWNGRADE,
// UNSAFE_DOWNGRADE), or FeatureUpgradeType(n).
func (t FeatureUpgradeType) String() string {
	switch t {
	case FeatureUpgrade:
		return "UPGRADE"
	case FeatureSafeDowngrade:
		return "SAFE_DOWNGRADE"
	case FeatureUnsafeDowngrade:
		return "UNSAFE_DOWNGRADE"
	}
	return "FeatureUpgradeType(" + strconv.Itoa(int(t)) + ")"
}

// FeatureUpdate is the new finalized level of one feature (Java's
// FeatureUpdate).
type FeatureUpdate struct {
	// MaxVersionLevel is the new level; 0 removes the feature (a
	// downgrade to level 0).
	MaxVersionLevel int16
	// UpgradeType must be set: FeatureUpgrade, FeatureSafeDowngrade or
	// FeatureUnsafeDowngrade.
	UpgradeType FeatureUpgradeType
}

// FeatureUpdateResult is UpdateFeatures' answer for one feature.
type FeatureUpdateResult struct {
	Feature string
	// Err is nil when the update was applied (or, validating only, would
	// be), otherwise the controller's error, e.g. ErrInvalidUpdateVersion,
	// ErrFeatureUpdateFailed, ErrClusterAuthorization (ALTER on the
	// cluster is needed). Updates are all or nothing: from
	// UpdateFeatures v2 the controller answers one error for the
	// request, which is then every feature's; before, it answered per
	// feature.
	Err error
}

// FeatureUpdateResults is one result per feature.
type FeatureUpdateResults []FeatureUpdateResult

// Err joins the per-feature errors (nil if every update succeeded).
func (rs FeatureUpdateResults) Err() error {
	var all []error
	for _, r := range rs {
		if r.Err != nil {
			all = append(all, fmt.Errorf("%s: %w", r.Feature, r.Err))
		}
	}
	return errors.Join(all...)
}

// UpdateFeatures sets the cluster's finalized feature levels (Java's
// updateFeatures): each named feature to its update's level. It goes to
// the controller (through any broker, which forwards it), retried when
// the controller moved. One result per feature, sorted by name; an
// update without a feature name or with an UpgradeType not set fails
// locally with ErrInvalidConfig, and nothing is sent. Brokers before
// Kafka 2.7 do not have the request (ErrUnsupported).
func (a *Admin) UpdateFeatures(ctx context.Context, updates map[string]FeatureUpdate) (FeatureUpdateResults, error) {
	return a.updateFeatures(ctx, updates, false)
}

// UpdateFeatures validates feature level updates without applying them,
// as Admin.UpdateFeatures would make them: the controller runs its checks
// (supported ranges, downgrade safety, dependencies, authorization) and
// answers per feature. Brokers before Kafka 3.3 (UpdateFeatures v0,
// without ValidateOnly) fail the call with ErrUnsupported rather than
// apply the updates.
func (v *ValidateOnlyAdmin) UpdateFeatures(ctx context.Context, updates map[string]FeatureUpdate) (FeatureUpdateResults, error) {
	return v.a.updateFeatures(ctx, updates, true)
}

func (a *Admin) updateFeatures(ctx context.Context, updates map[string]FeatureUpdate, validateOnly bool) (FeatureUpdateResults, error) {
	names := make([]string, 0, len(updates))
	for f, u := range updates {
		if f == "" {
			return nil, fmt.Errorf("%w: a feature update without a feature name", ErrInvalidConfig)
		}
		switch u.UpgradeType {
		case FeatureUpgrade, FeatureSafeDowngrade, FeatureUnsafeDowngrade:
		default:
			return nil, fmt.Errorf("%w: feature %s: upgrade type %v (want FeatureUpgrade, FeatureSafeDowngrade or FeatureUnsafeDowngrade)", ErrInvalidConfig, f, u.UpgradeType)
		}
		if u.MaxVersionLevel < 0 {
			return nil, fmt.Errorf("%w: feature %s: level %d", ErrInvalidConfig, f, u.MaxVersionLevel)
		}
		names = append(names, f)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return FeatureUpdateResults{}, nil
	}
	resp, err := a.controllerOp(ctx, func() kmsg.Request {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		req.TimeoutMillis = int32(a.c.cfg.requestTimeout.Milliseconds())
		req.ValidateOnly = validateOnly
		for _, f := range names {
			u := updates[f]
			fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
			fu.Feature = f
			fu.MaxVersionLevel = u.MaxVersionLevel
			fu.UpgradeType = int8(u.UpgradeType)
			fu.AllowDowngrade = u.UpgradeType != FeatureUpgrade // v0
			req.FeatureUpdates = append(req.FeatureUpdates, fu)
		}
		if validateOnly {
			return minVersionRequest{req, 1}
		}
		return req
	}, func(r kmsg.Response) (int16, *string) {
		fr := r.(*kmsg.UpdateFeaturesResponse)
		return fr.ErrorCode, fr.ErrorMessage
	})
	if resp == nil {
		return nil, err
	}
	// A top-level error (err, with resp) is every feature's.
	fr := resp.(*kmsg.UpdateFeaturesResponse)
	got := map[string]error{}
	if err == nil {
		for _, r := range fr.Results {
			got[r.Feature] = withMessage(r.ErrorCode, r.ErrorMessage)
		}
	}
	out := make(FeatureUpdateResults, len(names))
	for i, f := range names {
		e, ok := got[f]
		switch {
		case err != nil:
			e = err
		case !ok && len(fr.Results) == 0: // v2+: no error is every feature's success
			e = nil
		case !ok:
			e = fmt.Errorf("%w: no result for feature %s in the response", errs.ErrMalformed, f)
		}
		out[i] = FeatureUpdateResult{Feature: f, Err: e}
	}
	return out, nil
}
