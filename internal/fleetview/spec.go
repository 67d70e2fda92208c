package fleetview

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ring"
)

// EnsureSpec creates the fleet's spec as local.Spec() (an unset algorithm
// is ring.AlgorithmWeighted) if it does not exist, and returns the spec the
// node must use: the one it created, or the stored one if local agrees with
// it (ring.Spec.CompareConfig: an unset algorithm adopts the stored one's)
// or adopt is set; otherwise a *ring.SpecMismatchError. Creating and
// reading back are one transaction, so nodes that race to create the spec
// all see the one that won.
func EnsureSpec(ctx context.Context, kv clientv3.KV, layout keys.Layout, local ring.Config, adopt bool) (ring.Spec, error) {
	created := local.Spec()
	val, err := ring.EncodeSpec(created)
	if err != nil {
		return ring.Spec{}, fmt.Errorf("fleet: encode spec: %w", err)
	}
	k := layout.Spec()
	resp, err := kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(val))).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		return ring.Spec{}, fmt.Errorf("fleet: create or read the fleet's spec: %w", err)
	}
	if resp.Succeeded {
		return created, nil
	}
	var stored []byte
	if len(resp.Responses) > 0 {
		if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			stored = rr.Kvs[0].Value
		}
	}
	fleet, err := ring.DecodeSpec(stored)
	if err != nil {
		return ring.Spec{}, err
	}
	if adopt {
		return fleet, nil
	}
	if err := fleet.CompareConfig(local); err != nil {
		return ring.Spec{}, err
	}
	return fleet, nil
}
