package fleetview

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ring"
)

// EnsureSpec creates the fleet's spec as local if it does not exist, and
// returns the spec the node must use: local if it created it or the stored
// one equals it; the stored one if adopt is set; otherwise a
// *ring.SpecMismatchError. Creating and reading back are one transaction,
// so nodes that race to create the spec all see the one that won.
func EnsureSpec(ctx context.Context, kv clientv3.KV, layout keys.Layout, local ring.Spec, adopt bool) (ring.Spec, error) {
	val, err := json.Marshal(local)
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
		return local, nil
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
	return local, fleet.Compare(local)
}
