package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Leader describes a candidate of an election as its key records it. The
// holder of an election, its leader, is the candidate whose key has the
// lowest create revision under the election's prefix.
type Leader struct {
	// ID is the candidate's ElectionConfig.ID.
	ID string
	// Value is the candidate's ElectionConfig.Value.
	Value string
	// Epoch is the create revision of the leader's key: its term's fencing
	// epoch.
	Epoch int64
	// Lease is the lease the leader's key is bound to.
	Lease clientv3.LeaseID
	// Key is the leader's key in etcd.
	Key string
}

// candidate is the JSON value of a candidate key.
type candidate struct {
	ID    string `json:"id"`
	Value string `json:"value,omitempty"`
}

func encodeCandidate(id, value string) string {
	b, _ := json.Marshal(candidate{ID: id, Value: value}) // cannot fail on strings
	return string(b)
}

// leaderFromKV decodes a candidate key. A value that is not a candidate
// record (written by another client) is reported whole as Value.
func leaderFromKV(kv *mvccpb.KeyValue) Leader {
	l := Leader{Epoch: kv.CreateRevision, Lease: clientv3.LeaseID(kv.Lease), Key: string(kv.Key)}
	var c candidate
	if err := json.Unmarshal(kv.Value, &c); err == nil {
		l.ID, l.Value = c.ID, c.Value
	} else {
		l.Value = string(kv.Value)
	}
	return l
}

// Candidates reads, at one revision, the candidates of every election whose
// keys live under prefix, where an election named n keeps them under
// prefix+n+"/" (a fleet's elections live under "<fleet prefix>leader/"),
// and returns them by election name, each election's in the order they
// campaigned: its leader first. A key under prefix that names no election
// (no '/' after a non-empty name) is ignored.
func Candidates(ctx context.Context, kv clientv3.KV, prefix string) (map[string][]Leader, error) {
	resp, err := kv.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("election: read the candidates under %s: %w", prefix, err)
	}
	out := make(map[string][]Leader)
	for _, kv := range resp.Kvs {
		rest, _ := strings.CutPrefix(string(kv.Key), prefix)
		i := strings.LastIndexByte(rest, '/')
		if i <= 0 {
			continue
		}
		out[rest[:i]] = append(out[rest[:i]], leaderFromKV(kv))
	}
	return out, nil
}

// candidateKey returns the key of the candidate holding lease under prefix,
// the layout of etcd's concurrency.Election.
func candidateKey(prefix string, lease clientv3.LeaseID) string {
	return fmt.Sprintf("%s%x", prefix, int64(lease))
}

// errWatchEnded is the failure of an attempt whose watch ended without
// news (compaction, a closed stream), retried after a delay.
var errWatchEnded = errors.New("election: watch ended")
