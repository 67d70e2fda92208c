package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
)

// rememberIDs is how many idempotency keys a counter remembers: a client
// retries a call within seconds, far fewer calls than this per key.
const rememberIDs = 256

// etcdStore keeps each counter in one etcd key, written under the owner's
// token with etcdfence: a write whose token is older than the partition's
// floor is refused as stale (fence.ErrStale), whatever the writer believes.
// It keeps nothing per partition in memory, so a key's partition changing
// (a resize) asks nothing of it. It is the store without --db.
type etcdStore struct {
	fences *etcdfence.Store
}

// counter is a counter's stored value: its count and the idempotency keys
// of the last calls it applied, oldest first.
type counter struct {
	N   int64    `json:"n"`
	IDs []string `json:"ids,omitempty"`
}

func newEtcdStore(cli *clientv3.Client, cluster string, reg prometheus.Registerer) (*etcdStore, error) {
	fs, err := etcdfence.New(cli, etcdfence.Config{Cluster: cluster, Prefix: "/grpccounter/" + cluster + "/c/", Metrics: reg})
	if err != nil {
		return nil, err
	}
	return &etcdStore{fences: fs}, nil
}

// add adds delta to key's counter under token t, once per idempotency key
// id (an empty id is applied every time), and returns the counter's value
// after the call that id names.
func (s *etcdStore) add(ctx context.Context, t fence.Token, key string, delta int64, id string) (int64, error) {
	for {
		it, err := s.fences.Get(ctx, t, key)
		if err != nil {
			return 0, err
		}
		var c counter
		if it.Exists() {
			if err := json.Unmarshal(it.Value, &c); err != nil {
				return 0, fmt.Errorf("counter %q: %w", key, err)
			}
		}
		if id != "" && slices.Contains(c.IDs, id) {
			return c.N, nil // applied by an earlier attempt
		}
		c.N += delta
		if id != "" {
			c.IDs = append(c.IDs, id)
			if len(c.IDs) > rememberIDs {
				c.IDs = c.IDs[len(c.IDs)-rememberIDs:]
			}
		}
		v, _ := json.Marshal(c) // a struct of a number and strings always encodes
		_, err = s.fences.CompareAndSwap(ctx, t, key, it.Version, v)
		if errors.Is(err, etcdfence.ErrVersionMismatch) {
			continue // another call of this owner wrote the key in between
		}
		if err != nil {
			return 0, err
		}
		return c.N, nil
	}
}

// get returns key's counter, read under token t.
func (s *etcdStore) get(ctx context.Context, t fence.Token, key string) (int64, error) {
	it, err := s.fences.Get(ctx, t, key)
	if err != nil || !it.Exists() {
		return 0, err
	}
	var c counter
	if err := json.Unmarshal(it.Value, &c); err != nil {
		return 0, fmt.Errorf("counter %q: %w", key, err)
	}
	return c.N, nil
}
