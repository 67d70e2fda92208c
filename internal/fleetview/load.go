package fleetview

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
)

// ReadLoads reads the nodes' load reports at revision rev (0: the latest),
// by node ID. An undecodable report is logged and counts as none.
func ReadLoads(ctx context.Context, kv clientv3.KV, l keys.Layout, rev int64, log hclog.Logger) (map[string]keys.LoadReport, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := kv.Get(ctx, l.Loads(), opts...)
	if err != nil {
		return nil, fmt.Errorf("fleet: read load reports: %w", err)
	}
	out := make(map[string]keys.LoadReport, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		id, ok := l.LoadID(string(kv.Key))
		if !ok {
			continue
		}
		rep, err := keys.DecodeLoadReport(kv.Value)
		if err != nil {
			log.Warn("ignoring undecodable load report", "node", id, "error", err)
			continue
		}
		out[id] = rep
	}
	return out, nil
}

// PartitionLoads returns the load of every partition of r, the one rule
// the balancer and the operator's report share: the load the partition's
// owner by r reports for it if it reports one, else the largest any node
// reports (a partition that just moved is reported by its last owner
// until its new owner's report includes it). Partitions outside [0, P)
// are ignored.
func PartitionLoads(r *ring.Ring, reports map[string]keys.LoadReport) []float64 {
	loads := make([]float64, r.Partitions())
	fromOwner := make([]bool, len(loads))
	for id, rep := range reports {
		for i, p := range rep.Partitions {
			if p >= len(loads) {
				continue
			}
			l := rep.Loads[i]
			owner, _ := r.Owner(p)
			switch {
			case owner == id:
				loads[p], fromOwner[p] = l, true
			case !fromOwner[p]:
				loads[p] = max(loads[p], l)
			}
		}
	}
	return loads
}

// MemberLoads returns the load of every member of r: the sum of the loads
// of the partitions r gives it (0 for a member with none).
func MemberLoads(r *ring.Ring, loads []float64) map[string]float64 {
	out := make(map[string]float64, len(r.Members()))
	for _, id := range r.Members() {
		out[id] = 0
	}
	for p := range r.Partitions() {
		if id, ok := r.Owner(p); ok && p < len(loads) {
			out[id] += loads[p]
		}
	}
	return out
}
