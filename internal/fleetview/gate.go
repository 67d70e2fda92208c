package fleetview

import (
	"context"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
)

// RequireFeature makes sure the fleet may use feature: every live member
// publishes it, and the fleet's spec records it in use, so that a build
// that lacks it is refused at Join from then on. It reads the spec and the
// members at one revision and writes the spec with feature added in one
// transaction that holds only if the spec is unchanged and no member key
// was written since the read: a member without the feature cannot slip in
// between the check and the record (a node reads the spec after it writes
// its member key, see ownership's checkFeatures). A deleted member key
// changes nothing: fewer members lack nothing more.
//
// It returns the spec as recorded, or an error from FeatureError naming the
// members that lack feature (their IDs sorted), or the etcd error.
func RequireFeature(ctx context.Context, kv clientv3.KV, layout keys.Layout, feature string) (Spec, error) {
	for {
		resp, err := kv.Txn(ctx).Then(
			clientv3.OpGet(layout.Spec()),
			clientv3.OpGet(layout.Members(), clientv3.WithPrefix()),
		).Commit()
		if err != nil {
			return Spec{}, fmt.Errorf("fleet: read the spec and members for feature %q: %w", feature, err)
		}
		skv := resp.Responses[0].GetResponseRange().GetKvs()
		if len(skv) == 0 {
			return Spec{}, fmt.Errorf("fleet: feature %q: the fleet has no spec at %s", feature, layout.Spec())
		}
		spec, err := DecodeStored(skv[0].Value, skv[0].ModRevision)
		if err != nil {
			return Spec{}, err
		}
		var lacking []string
		for _, m := range resp.Responses[1].GetResponseRange().GetKvs() {
			id, ok := layout.MemberID(string(m.Key))
			if !ok {
				continue
			}
			rec, err := keys.DecodeMember(m.Value)
			if err != nil || !Has(rec.Features, feature) {
				lacking = append(lacking, id)
			}
		}
		if len(lacking) > 0 {
			slices.Sort(lacking)
			return Spec{}, FeatureError(feature, lacking)
		}
		if Has(spec.Requires, feature) {
			return spec, nil
		}
		spec.Requires = withFeature(spec.Requires, feature)
		val, err := EncodeStored(spec)
		if err != nil {
			return Spec{}, err
		}
		w, err := kv.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(layout.Spec()), "=", spec.ModRev),
			clientv3.Compare(clientv3.ModRevision(layout.Members()), "<", resp.Header.Revision+1).WithPrefix(),
		).Then(clientv3.OpPut(layout.Spec(), string(val))).Commit()
		if err != nil {
			return Spec{}, fmt.Errorf("fleet: record feature %q in the spec: %w", feature, err)
		}
		if w.Succeeded {
			spec.ModRev = w.Header.Revision
			return spec, nil
		}
		// The spec or a member changed since the read: check again.
	}
}
