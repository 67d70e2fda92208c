package fleetview

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
)

// A member value's lease TTL is optional: a value written by a build that
// publishes none, or one out of etcd's range, decodes with TTL 0
// (unknown); the rest of the member decodes as before.
func TestMemberTTLDecoding(t *testing.T) {
	layout := keys.New("ttl")
	r := &Reader{Layout: layout, Partitions: 4, Log: hclog.NewNullLogger()}
	kv := func(id, value string) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte(layout.Member(id)), Value: []byte(value), Lease: 7}
	}
	lst := r.Decode(1, []*mvccpb.KeyValue{
		kv("old", `{"id":"old","addr":"a:1"}`),
		kv("new", `{"id":"new","addr":"b:1","ttl":10}`),
		kv("huge", `{"id":"huge","addr":"c:1","ttl":9000000001}`),
		kv("negative", `{"id":"negative","addr":"d:1","ttl":-3}`),
	}, nil, nil, nil, nil)
	for id, want := range map[string]time.Duration{"old": 0, "new": 10 * time.Second, "huge": 0, "negative": 0} {
		rec, ok := lst.Members[id]
		if assert.True(t, ok, id) {
			assert.Equal(t, want, rec.TTL, id)
			assert.Equal(t, clientv3.LeaseID(7), rec.Lease, id)
			assert.NotEmpty(t, rec.Member.Addr, id)
		}
	}
	v, err := keys.EncodeMember(keys.Member{ID: "n", Addr: "x:1", TTLSeconds: 2})
	assert.NoError(t, err)
	assert.JSONEq(t, `{"id":"n","addr":"x:1","ttl":2}`, v)
}
