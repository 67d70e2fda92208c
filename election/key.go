package election

import (
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/leaderkey"
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

// leaderFromKV decodes a candidate key (leaderkey.Decode). A value that is
// not a candidate record (written by another client) is reported whole as
// Value.
func leaderFromKV(kv *mvccpb.KeyValue) Leader { return Leader(leaderkey.Decode(kv)) }

// candidateKey returns the key of the candidate holding lease under prefix,
// the layout of etcd's concurrency.Election.
func candidateKey(prefix string, lease clientv3.LeaseID) string {
	return fmt.Sprintf("%s%x", prefix, int64(lease))
}

// errWatchEnded is the failure of an attempt whose watch ended without
// news (compaction, a closed stream), retried after a delay.
var errWatchEnded = errors.New("election: watch ended")
