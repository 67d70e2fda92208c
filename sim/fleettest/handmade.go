package fleettest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
)

// Handmade writes a fleet's spec, members and claims straight into etcd,
// as nodes would, for test servers that play nodes (that refuse calls
// with hints of the test's choosing, say) and for clients that follow
// them.
type Handmade struct {
	tb     testing.TB
	cli    *clientv3.Client
	layout keys.Layout
}

// NewHandmade returns a Handmade for the fleet cluster of cli's etcd.
func NewHandmade(tb testing.TB, cli *clientv3.Client, cluster string) Handmade {
	return Handmade{tb: tb, cli: cli, layout: keys.New(cluster)}
}

// Spec writes the fleet's spec, as the first node to join would.
func (h Handmade) Spec(partitions int) {
	h.tb.Helper()
	v, err := fleetview.EncodeSpec(ring.Config{Partitions: partitions, LoadFactor: 1.25}.Spec())
	require.NoError(h.tb, err)
	_, err = h.cli.Put(context.Background(), h.layout.Spec(), string(v))
	require.NoError(h.tb, err)
}

// Member writes the member id at addr, with no lease.
func (h Handmade) Member(id, addr string) {
	h.tb.Helper()
	v, err := keys.EncodeMember(keys.Member{ID: id, Addr: addr})
	require.NoError(h.tb, err)
	_, err = h.cli.Put(context.Background(), h.layout.Member(id), v)
	require.NoError(h.tb, err)
}

// Claim gives partition p to id, with no lease, and returns the claim's
// epoch.
func (h Handmade) Claim(p int, id string) int64 {
	h.tb.Helper()
	_, err := h.cli.Delete(context.Background(), h.layout.Claim(p))
	require.NoError(h.tb, err)
	resp, err := h.cli.Put(context.Background(), h.layout.Claim(p), id)
	require.NoError(h.tb, err)
	return resp.Header.Revision
}
