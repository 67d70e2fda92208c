// Package leaderkey is the candidate keys of tenure's elections, as the
// election package writes them and the fleet package's Operator reads them
// (its Leaders, Audit and ForceRelease of a leader scope): an election named n keeps
// its candidates' keys under "<fleet prefix>leader/n/", each bound to its
// candidate's lease, with a JSON value {"id": ..., "value": ...}; the
// candidate whose key has the lowest create revision leads, and that
// revision is its epoch.
package leaderkey

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Candidate is one candidate key: what election.Leader reports, field for
// field.
type Candidate struct {
	// ID and Value are the candidate's ElectionConfig.ID and .Value.
	ID    string
	Value string
	// Epoch is the key's create revision.
	Epoch int64
	// Lease is the lease the key is bound to.
	Lease clientv3.LeaseID
	// Key is the key.
	Key string
}

// record is the JSON value of a candidate key.
type record struct {
	ID    string `json:"id"`
	Value string `json:"value,omitempty"`
}

// Encode returns the value of the key of candidate id publishing value.
func Encode(id, value string) string {
	b, _ := json.Marshal(record{ID: id, Value: value}) // cannot fail on strings
	return string(b)
}

// Decode decodes a candidate key. A value that is not a candidate record
// (written by another client) is reported whole as Value.
func Decode(kv *mvccpb.KeyValue) Candidate {
	c := Candidate{Epoch: kv.CreateRevision, Lease: clientv3.LeaseID(kv.Lease), Key: string(kv.Key)}
	var r record
	if err := json.Unmarshal(kv.Value, &r); err == nil {
		c.ID, c.Value = r.ID, r.Value
	} else {
		c.Value = string(kv.Value)
	}
	return c
}

// ReadAll reads, at one revision, the candidates of every election whose
// keys live under prefix, where an election named n keeps them under
// prefix+n+"/" (a fleet's elections live under "<fleet prefix>leader/"),
// and returns them by election name, each election's in the order they
// campaigned: its leader first. A key under prefix that names no election
// (no '/' after a non-empty name) is ignored.
func ReadAll(ctx context.Context, kv clientv3.KV, prefix string) (map[string][]Candidate, error) {
	resp, err := kv.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("election: read the candidates under %s: %w", prefix, err)
	}
	out := make(map[string][]Candidate)
	for _, kv := range resp.Kvs {
		rest, _ := strings.CutPrefix(string(kv.Key), prefix)
		i := strings.LastIndexByte(rest, '/')
		if i <= 0 {
			continue
		}
		out[rest[:i]] = append(out[rest[:i]], Decode(kv))
	}
	return out, nil
}
