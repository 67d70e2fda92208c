package memetcd

import (
	"bytes"
	"slices"
	"sort"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// version is one revision of a key: its value, or a tombstone (kv nil).
type version struct {
	rev int64
	kv  *mvccpb.KeyValue // nil: deleted at rev
}

// store is the MVCC keyspace. It is not safe for concurrent use; the Server
// guards it.
type store struct {
	rev        int64    // current revision
	compactRev int64    // -1 before the first compaction, as in etcd
	keys       []string // every key with a version, sorted
	hist       map[string][]version
	events     []*mvccpb.Event // every change, in revision order
	leaseOf    map[string]int64

	// changes of the write transaction in progress, at rev+1
	changes []*mvccpb.Event
}

func newStore() *store {
	return &store{rev: 1, compactRev: -1, hist: make(map[string][]version), leaseOf: make(map[string]int64)}
}

// latest returns the key's current value, including changes of the write
// in progress, or nil.
func (s *store) latest(key string) *mvccpb.KeyValue {
	vs := s.hist[key]
	if len(vs) == 0 {
		return nil
	}
	return vs[len(vs)-1].kv
}

// at returns the key's value at revision rev, or nil.
func (s *store) at(key string, rev int64) *mvccpb.KeyValue {
	vs := s.hist[key]
	i := sort.Search(len(vs), func(i int) bool { return vs[i].rev > rev })
	if i == 0 {
		return nil
	}
	return vs[i-1].kv
}

// readRev is the revision that reads inside the write in progress see.
func (s *store) readRev() int64 {
	if len(s.changes) > 0 {
		return s.rev + 1
	}
	return s.rev
}

// rangeKVs returns the live key-values in [key, end) at rev, in key order
// (end nil: key alone; end empty: to the end of the keyspace).
func (s *store) rangeKVs(key, end []byte, rev int64) []*mvccpb.KeyValue {
	if end == nil {
		if kv := s.at(string(key), rev); kv != nil {
			return []*mvccpb.KeyValue{kv}
		}
		return nil
	}
	var out []*mvccpb.KeyValue
	i := sort.SearchStrings(s.keys, string(key))
	for ; i < len(s.keys); i++ {
		k := s.keys[i]
		if len(end) > 0 && k >= string(end) {
			break
		}
		if kv := s.at(k, rev); kv != nil {
			out = append(out, kv)
		}
	}
	return out
}

// put writes key at rev+1 as part of the write in progress, and returns
// the new key-value and the lease the key was bound to before.
func (s *store) put(key, value []byte, lease int64) (*mvccpb.KeyValue, int64) {
	k := string(key)
	rev := s.rev + 1
	kv := &mvccpb.KeyValue{Key: bytes.Clone(key), Value: bytes.Clone(value), CreateRevision: rev, ModRevision: rev, Version: 1, Lease: lease}
	if prev := s.latest(k); prev != nil {
		kv.CreateRevision = prev.CreateRevision
		kv.Version = prev.Version + 1
	}
	s.record(k, kv)
	old := s.leaseOf[k]
	if lease == 0 {
		delete(s.leaseOf, k)
	} else {
		s.leaseOf[k] = lease
	}
	s.changes = append(s.changes, &mvccpb.Event{Type: mvccpb.PUT, Kv: kv})
	return kv, old
}

// del deletes key at rev+1 as part of the write in progress, and returns
// the lease the key was bound to.
func (s *store) del(key string) int64 {
	s.record(key, nil)
	old := s.leaseOf[key]
	delete(s.leaseOf, key)
	s.changes = append(s.changes, &mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: s.rev + 1}})
	return old
}

func (s *store) record(key string, kv *mvccpb.KeyValue) {
	vs, ok := s.hist[key]
	if !ok {
		i := sort.SearchStrings(s.keys, key)
		s.keys = slices.Insert(s.keys, i, key)
	}
	s.hist[key] = append(vs, version{rev: s.rev + 1, kv: kv})
}

// commit ends the write in progress and returns its events (nil if it
// changed nothing; the revision then stays).
func (s *store) commit() []*mvccpb.Event {
	evs := s.changes
	s.changes = nil
	if len(evs) == 0 {
		return nil
	}
	s.rev++
	s.events = append(s.events, evs...)
	return evs
}

// eventsFrom returns the events of revisions >= rev, in order.
func (s *store) eventsFrom(rev int64) []*mvccpb.Event {
	i := sort.Search(len(s.events), func(i int) bool { return s.events[i].Kv.ModRevision >= rev })
	return s.events[i:]
}

// compact discards history before rev; reads below rev fail from now on.
func (s *store) compact(rev int64) {
	s.compactRev = rev
	keep := s.keys[:0]
	for _, k := range s.keys {
		vs := s.hist[k]
		i := sort.Search(len(vs), func(i int) bool { return vs[i].rev > rev })
		if i > 0 {
			i-- // the version in force at rev stays readable
		}
		vs = vs[i:]
		if len(vs) == 1 && vs[0].kv == nil && vs[0].rev < rev {
			delete(s.hist, k)
			continue
		}
		s.hist[k] = slices.Clone(vs)
		keep = append(keep, k)
	}
	s.keys = keep
	s.events = slices.Clone(s.eventsFrom(rev))
}

// cloneKV returns a deep copy of kv.
func cloneKV(kv *mvccpb.KeyValue) *mvccpb.KeyValue {
	if kv == nil {
		return nil
	}
	return &mvccpb.KeyValue{Key: bytes.Clone(kv.Key), Value: bytes.Clone(kv.Value), CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease}
}
