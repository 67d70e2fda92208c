package grpcroute_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
)

// keysSeen records the incoming metadata of the unary calls a gRPC
// server ran, by request key.
type keysSeen struct {
	mu   sync.Mutex
	seen map[string]metadata.MD
}

func (k *keysSeen) interceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	key, _ := requestKey(ctx, "", req)
	md, _ := metadata.FromIncomingContext(ctx)
	k.mu.Lock()
	k.seen[key] = md
	k.mu.Unlock()
	return h(ctx, req)
}

// of returns the values of the metadata name of the call for key.
func (k *keysSeen) of(key, name string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.seen[key].Get(name)
}

// With ClientConfig.OmitKeyMetadata, calls carry no MetadataKey and go to
// their owner, which takes the key from the message (ServerConfig.Key),
// with no refusal; without it they carry the key as before. A Server
// without a Key fails such calls with InvalidArgument.
func TestOmitKeyMetadata(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "keymsg", false)
	seen := &keysSeen{seen: map[string]metadata.MD{}}
	f.serverKey = requestKey
	f.serverOpts = []grpc.ServerOption{grpc.ChainUnaryInterceptor(seen.interceptor)}
	f.startStable("a", "b", "c")
	c, omit := newClient(t, f.cli, "keymsg", grpcroute.ClientConfig{OmitKeyMetadata: true})
	_, sends := newClient(t, f.cli, "keymsg", grpcroute.ClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	for i := range 30 {
		key := fmt.Sprintf("omit-%d", i)
		reply, err := omit.Add(ctx, &counterpb.AddRequest{Key: key, Delta: 1})
		require.NoError(t, err)
		assert.Equal(t, f.owner(key).id, reply.Node, "key %s", key)
		assert.Empty(t, seen.of(key, grpcroute.MetadataKey), "key %s: the call carried %q metadata", key, grpcroute.MetadataKey)

		key = fmt.Sprintf("sends-%d", i)
		reply, err = sends.Add(ctx, &counterpb.AddRequest{Key: key, Delta: 1})
		require.NoError(t, err)
		assert.Equal(t, f.owner(key).id, reply.Node, "key %s", key)
		assert.Equal(t, []string{key}, seen.of(key, grpcroute.MetadataKey), "key %s", key)
	}
	assert.Zero(t, c.Stats().Retries)
	for _, m := range f.list() {
		assert.Zero(t, m.rs.Stats().Refused, "node %s", m.id)
	}

	// A fleet whose Server has no Key.
	g := newFleet(t, etcd, "keymeta", false)
	m := g.start("a")
	g.waitStable()
	_, omitG := newClient(t, g.cli, "keymeta", grpcroute.ClientConfig{OmitKeyMetadata: true})
	_, err := omitG.Add(ctx, &counterpb.AddRequest{Key: "k", Delta: 1})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), grpcroute.ErrNoKey.Error())
	assert.Zero(t, m.rs.Stats().Served)
	assert.Zero(t, g.store.value("k"), "the call ran")

	// The option needs a Key.
	err = grpcroute.ClientConfig{OmitKeyMetadata: true, Key: nil}.Validate()
	assert.ErrorIs(t, err, grpcroute.ErrInvalidConfig)
	_, err = grpcroute.NewClient(f.cli, grpcroute.ClientConfig{OmitKeyMetadata: true})
	assert.ErrorIs(t, err, grpcroute.ErrInvalidConfig)
}

// A Server with a ServerConfig.Key fails a call whose MetadataKey
// metadata does not name the request's key with InvalidArgument: the
// caller routed it by another key. Metadata that agrees, or none, is
// served.
func TestKeyMetadataDisagrees(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "keydis", false)
	f.serverKey = requestKey
	m := f.start("a")
	f.waitStable()
	conn, err := grpc.NewClient(m.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	plain := counterpb.NewCounterClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	for name, md := range map[string]metadata.MD{
		"other": metadata.Pairs(grpcroute.MetadataKey, "b"),
		"empty": metadata.Pairs(grpcroute.MetadataKey, ""),
		"two":   metadata.Pairs(grpcroute.MetadataKey, "a", grpcroute.MetadataKey, "b"),
		"twice": metadata.Pairs(grpcroute.MetadataKey, "a", grpcroute.MetadataKey, "a"),
	} {
		_, err := plain.Add(metadata.NewOutgoingContext(ctx, md), &counterpb.AddRequest{Key: "a", Delta: 1})
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", name, err)
		assert.Contains(t, status.Convert(err).Message(), grpcroute.ErrInvalidKey.Error(), name)
	}
	assert.Zero(t, m.rs.Stats().Served)
	assert.Zero(t, f.store.value("a"), "a call ran")

	for name, md := range map[string]metadata.MD{
		"none":  nil,
		"agree": metadata.Pairs(grpcroute.MetadataKey, "a"),
	} {
		_, err := plain.Add(metadata.NewOutgoingContext(ctx, md), &counterpb.AddRequest{Key: "a", Delta: 1})
		assert.NoError(t, err, name)
	}
	assert.Equal(t, int64(2), m.rs.Stats().Served)
}

// With ClientConfig.NoIdempotencyKey, calls to the methods it names carry
// no MetadataIdempotencyKey (unless the caller set one); other calls carry
// one, and so do all calls of a Client without it.
func TestNoIdempotencyKey(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "noidem", false)
	seen := &keysSeen{seen: map[string]metadata.MD{}}
	f.serverOpts = []grpc.ServerOption{grpc.ChainUnaryInterceptor(seen.interceptor)}
	f.startStable("a", "b")
	reads := func(method string) bool { return method == counterpb.Counter_Get_FullMethodName }
	_, skip := newClient(t, f.cli, "noidem", grpcroute.ClientConfig{NoIdempotencyKey: reads})
	_, all := newClient(t, f.cli, "noidem", grpcroute.ClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	_, err := skip.Get(ctx, &counterpb.GetRequest{Key: "get-skip"})
	require.NoError(t, err)
	assert.Empty(t, seen.of("get-skip", grpcroute.MetadataIdempotencyKey))
	assert.Equal(t, []string{"get-skip"}, seen.of("get-skip", grpcroute.MetadataKey))
	_, err = skip.Add(ctx, &counterpb.AddRequest{Key: "add-skip", Delta: 1})
	require.NoError(t, err)
	assert.Len(t, seen.of("add-skip", grpcroute.MetadataIdempotencyKey), 1)
	own := metadata.AppendToOutgoingContext(ctx, grpcroute.MetadataIdempotencyKey, "mine")
	_, err = skip.Get(own, &counterpb.GetRequest{Key: "get-own"})
	require.NoError(t, err)
	assert.Equal(t, []string{"mine"}, seen.of("get-own", grpcroute.MetadataIdempotencyKey))
	_, err = all.Get(ctx, &counterpb.GetRequest{Key: "get-all"})
	require.NoError(t, err)
	assert.Len(t, seen.of("get-all", grpcroute.MetadataIdempotencyKey), 1)
}
