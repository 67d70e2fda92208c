package watchstream_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/tenure-go/tenure/internal/watchstream"
)

// TestOwn: two watch contexts from one parent differ in their outgoing
// metadata (the etcd client keys its watch streams by it) and keep the
// parent's metadata and cancellation.
func TestOwn(t *testing.T) {
	parent, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	a, b := watchstream.Own(parent), watchstream.Own(parent)
	mda, ok := metadata.FromOutgoingContext(a)
	require.True(t, ok)
	mdb, _ := metadata.FromOutgoingContext(b)
	assert.NotEqual(t, mda, mdb)
	assert.Equal(t, []string{"true"}, mda.Get("hasleader"))
	cancel()
	<-a.Done()
	<-b.Done()
}
