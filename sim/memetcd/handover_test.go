package memetcd_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// TestConformanceHandover runs the hand-over of a claim, as ownership's
// deleteTxn writes it, against a real etcd and memetcd and requires the
// same results: nested in an outer transaction with another put, If the
// claim's ModRevision is the holder's epoch, the successor's member key is
// bound to its lease and the spec is unchanged, Then put the claim bound
// to the successor's lease, Else get it. Once with everything in place
// (handed over: the claim keeps its CreateRevision, its ModRevision is the
// transaction's, its lease the successor's, and it goes when that lease is
// revoked), once with the successor's lease revoked first (refused: the
// member key is gone, and a LeaseValue compare on a missing key fails),
// and once with the spec written since (refused).
func TestConformanceHandover(t *testing.T) {
	c := cluster.New(t, 1)
	real := c.NewClient(t)
	want := handoverScenario(t, real, "/handover/")

	srv, err := memetcd.New(memetcd.Config{Clock: clockwork.NewFakeClock(), MinLeaseTTL: time.Second})
	require.NoError(t, err)
	defer srv.Close()
	mc := srv.NewClient()
	defer mc.Close()
	got := handoverScenario(t, mc, "/handover/")
	require.Equal(t, want, got)
	t.Logf("etcd and memetcd:\n%s", strings.Join(got, "\n"))
	require.Contains(t, got, "handed ok=true claim={create=r2 mod=r5 lease=S val=succ}", "the hand-over applied")
	require.Contains(t, got, "successor revoked: ok=false claim={create=r7 mod=r7 lease=H val=holder}", "a successor whose lease ended refuses it")
}

func handoverScenario(t *testing.T, api etcdAPI, pf string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	var base int64
	leaseName := map[int64]string{0: "-"}
	kvDesc := func(r *clientv3.GetResponse) string {
		if len(r.Kvs) == 0 {
			return "none"
		}
		kv := r.Kvs[0]
		return fmt.Sprintf("{create=r%d mod=r%d lease=%s val=%s}", kv.CreateRevision-base, kv.ModRevision-base, leaseName[kv.Lease], kv.Value)
	}
	claim, member, spec, handoff := pf+"claim", pf+"member", pf+"spec", pf+"handoff"
	grant := func(name string) clientv3.LeaseID {
		g, err := api.Grant(ctx, 10)
		require.NoError(t, err)
		leaseName[int64(g.ID)] = name
		return g.ID
	}
	put := func(k, v string, opts ...clientv3.OpOption) int64 {
		r, err := api.Put(ctx, k, v, opts...)
		require.NoError(t, err)
		return r.Header.Revision
	}
	handOver := func(label string, epoch, specRev int64, succ clientv3.LeaseID) {
		nested := clientv3.OpTxn(
			[]clientv3.Cmp{
				clientv3.Compare(clientv3.ModRevision(claim), "=", epoch),
				clientv3.Compare(clientv3.LeaseValue(member), "=", int64(succ)),
				clientv3.Compare(clientv3.ModRevision(spec), "=", specRev),
			},
			[]clientv3.Op{clientv3.OpPut(claim, "succ", clientv3.WithLease(succ))},
			[]clientv3.Op{clientv3.OpGet(claim)})
		resp, err := api.Txn(ctx).Then(nested, clientv3.OpPut(handoff, "x")).Commit()
		require.NoError(t, err)
		tr := resp.Responses[0].GetResponseTxn()
		g, err := api.Get(ctx, claim)
		require.NoError(t, err)
		out = append(out, fmt.Sprintf("%s ok=%v claim=%s", label, tr.Succeeded, kvDesc(g)))
		if !tr.Succeeded {
			rr := tr.Responses[0].GetResponseRange()
			out = append(out, fmt.Sprintf("%s else-get=%d keys", label, len(rr.Kvs)))
		}
	}

	holder := grant("H")
	base = put(spec, "v1") - 1
	specRev := base + 1
	epoch := put(claim, "holder", clientv3.WithLease(holder))
	succ := grant("S")
	put(member, "m", clientv3.WithLease(succ))
	put(pf+"other", "o")
	handOver("handed", epoch, specRev, succ)
	_, err := api.Revoke(ctx, succ)
	require.NoError(t, err)
	g, err := api.Get(ctx, claim)
	require.NoError(t, err)
	out = append(out, "after the successor's lease was revoked: claim="+kvDesc(g))

	epoch = put(claim, "holder", clientv3.WithLease(holder))
	succ = grant("S2")
	put(member, "m", clientv3.WithLease(succ))
	_, err = api.Revoke(ctx, succ)
	require.NoError(t, err)
	handOver("successor revoked:", epoch, specRev, succ)

	succ = grant("S3")
	put(member, "m", clientv3.WithLease(succ))
	put(spec, "v2")
	handOver("spec written:", epoch, specRev, succ)
	return out
}
