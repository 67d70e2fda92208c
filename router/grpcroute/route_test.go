package grpcroute_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/router/grpcroute/tenurepb"
	"github.com/tenure-go/tenure/sim/cluster"
)

// In steady state every call goes straight to its key's owner: the owner
// serves it under its epoch, and no node refuses anything, nor does the
// client retry.
func TestSteadyState(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "steady", false)
	f.startStable("a", "b", "c")
	reg := prometheus.NewRegistry()
	c, counter := newClient(t, f.cli, "steady", grpcroute.ClientConfig{Metrics: reg})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	served := map[string]int{}
	for i := range 200 {
		key := fmt.Sprintf("k%d", i)
		owner := f.owner(key)
		reply, err := counter.Add(ctx, &counterpb.AddRequest{Key: key, Delta: 1})
		require.NoError(t, err)
		assert.Equal(t, owner.id, reply.Node, "key %s", key)
		assert.Equal(t, owner.node.Lookup(key).Epoch, reply.Epoch, "key %s", key)
		served[reply.Node]++
	}
	// A streaming call too.
	key := "streamed"
	stream, err := counter.AddStream(grpcroute.WithKey(ctx, key))
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, stream.Send(&counterpb.AddRequest{Key: key, Delta: 2}))
	}
	reply, err := stream.CloseAndRecv()
	require.NoError(t, err)
	assert.Equal(t, int64(6), reply.Value)
	assert.Equal(t, f.owner(key).id, reply.Node)

	for _, m := range f.list() {
		st := m.rs.Stats()
		assert.Zero(t, st.Refused, "node %s refused calls in steady state", m.id)
		assert.Equal(t, int64(served[m.id])+map[bool]int64{true: 1}[m.id == reply.Node], st.Served, "node %s", m.id)
	}
	cs := c.Stats()
	assert.Zero(t, cs.Retries)
	assert.Equal(t, int64(201), cs.OK)
	assert.Equal(t, int64(201), cs.Attempts)
	assert.Equal(t, 201.0, counterValue(t, reg, "tenure_grpc_client_calls_total", map[string]string{"result": "ok"}))
	assert.Equal(t, 0.0, counterValue(t, reg, "tenure_grpc_client_calls_total", map[string]string{"result": "retried"}))
	assert.Equal(t, 0.0, counterValue(t, reg, "tenure_grpc_client_retries_total", nil))
}

// A call without a key, or with one that cannot be used, fails with
// InvalidArgument: at the client before anything is sent, and at a node
// when a client that does not route sends it.
func TestInvalidKey(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "nokey", false)
	m := f.start("a")
	f.waitStable()
	c, counter := newClient(t, f.cli, "nokey", grpcroute.ClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	_, err := counter.Add(ctx, &counterpb.AddRequest{Delta: 1})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.ErrorIs(t, err, grpcroute.ErrNoKey)
	_, err = counter.AddStream(ctx) // a stream without WithKey
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.ErrorIs(t, err, grpcroute.ErrNoKey)
	_, err = counter.Add(grpcroute.WithKey(ctx, "\xff"), &counterpb.AddRequest{Key: "\xff", Delta: 1})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.ErrorIs(t, err, grpcroute.ErrInvalidKey)
	assert.Equal(t, int64(3), c.Stats().Failed)
	assert.Zero(t, c.Stats().Attempts, "nothing was sent")

	// A plain gRPC client straight to the node.
	conn, err := grpc.NewClient(m.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	plain := counterpb.NewCounterClient(conn)
	for name, md := range map[string]metadata.MD{
		"none":  nil,
		"empty": metadata.Pairs(grpcroute.MetadataKey, ""),
		"two":   metadata.Pairs(grpcroute.MetadataKey, "a", grpcroute.MetadataKey, "b"),
	} {
		_, err := plain.Add(metadata.NewOutgoingContext(ctx, md), &counterpb.AddRequest{Key: "a", Delta: 1})
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", name, err)
	}
	assert.Zero(t, m.rs.Stats().Served)
	assert.Zero(t, m.rs.Stats().Refused)
}

// A node that does not own a call's key refuses it with Unavailable and a
// tenure.v1.Refusal detail naming the owner, its address and epoch, which
// a client that knows only the generated protobuf types decodes; the
// refusal is counted in the node's metrics.
func TestRefusalDetail(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "detail", false)
	f.metrics = prometheus.NewRegistry()
	a, b := f.start("a"), f.start("b")
	f.waitStable()
	key := keyOwnedBy(t, a, "detail")
	owner := a.node.Lookup(key)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A plain client sends the call to b.
	conn, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	_, err = counterpb.NewCounterClient(conn).Add(metadata.AppendToOutgoingContext(ctx, grpcroute.MetadataKey, key),
		&counterpb.AddRequest{Key: key, Delta: 1})
	st := status.Convert(err)
	require.Equal(t, codes.Unavailable, st.Code(), "%v", err)
	// Only the generated types: the status proto's Any details.
	details := st.Proto().GetDetails()
	require.Len(t, details, 1)
	var ref tenurepb.Refusal
	require.NoError(t, details[0].UnmarshalTo(&ref))
	assert.Equal(t, tenurepb.Refusal_NOT_OWNER, ref.Kind)
	assert.True(t, ref.Retryable)
	assert.Equal(t, uint32(owner.Partition), ref.Partition)
	assert.Equal(t, "a", ref.Owner)
	assert.Equal(t, a.addr, ref.Addr)
	assert.Equal(t, owner.Epoch, ref.Epoch)
	assert.NotZero(t, ref.RingVersion)
	assert.True(t, proto.Equal(&ref, grpcroute.RefusalOf(err)), "RefusalOf reads the same detail")

	assert.Equal(t, grpcroute.ServerStats{Refused: 1}, b.rs.Stats())
	assert.Equal(t, 1.0, serverCalls(t, f.metrics, "b", "refused"))
	assert.Equal(t, 0.0, serverCalls(t, f.metrics, "a", "refused"))
	assert.Equal(t, 0.0, serverCalls(t, f.metrics, "b", "served"))
}

// serverCalls returns tenure_grpc_server_calls_total{node, result} in reg.
func serverCalls(t *testing.T, reg *prometheus.Registry, node, result string) float64 {
	t.Helper()
	return counterValue(t, reg, "tenure_grpc_server_calls_total", map[string]string{"node": node, "result": result})
}

// counterValue returns the counter name{want} in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			match := true
			for k, v := range want {
				match = match && labels[k] == v
			}
			if match {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s%v", name, want)
	return 0
}
