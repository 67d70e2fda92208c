package fleetview

import (
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
)

// This file holds the Reader's one set of decoding rules, shared by its
// listings and its watch.

// maxTTLSeconds is the longest lease TTL etcd grants (its MaxLeaseTTL, 9e9
// seconds); a member value that publishes a longer one publishes none.
const maxTTLSeconds = 9_000_000_000

// member decodes a member key-value. ok is false for a key whose ID is not
// a valid node ID.
func (r *Reader) member(kv *mvccpb.KeyValue) (id string, rec MemberRec, ok bool) {
	id, ok = r.Layout.MemberID(string(kv.Key))
	if !ok || ring.ValidateNodeID(id) != nil {
		r.Log.Warn("ignoring member key with an invalid node ID", "key", string(kv.Key))
		return "", MemberRec{}, false
	}
	m, err := keys.DecodeMember(kv.Value)
	if err != nil {
		r.Log.Warn("undecodable member value; using an empty address", "node", id, "error", err)
		m = keys.Member{}
	}
	w := m.Weight
	if w < 1 || w > ring.MaxWeight {
		if w != 0 {
			r.Log.Warn("member weight out of range; using 1", "node", id, "weight", w, "max", ring.MaxWeight)
		}
		w = 1
	}
	var ttl time.Duration
	if m.TTLSeconds > 0 && m.TTLSeconds <= maxTTLSeconds {
		ttl = time.Duration(m.TTLSeconds) * time.Second
	}
	return id, MemberRec{Member: Member{ID: id, Addr: m.Addr, Meta: m.Meta, Weight: w, Prepares: m.Prepares,
		Build: m.Build, Features: m.Features}, Lease: clientv3.LeaseID(kv.Lease), TTL: ttl}, true
}

// placement decodes a placement key-value. ok is false for a key that is
// not a placement key of a partition in [0, P), or a value that is not a
// placement on a valid node ID; such entries are ignored (logged), so the
// ring decides those partitions.
func (r *Reader) placement(kv *mvccpb.KeyValue) (p int, pl Placement, ok bool) {
	p, ok = r.placementPartition(kv.Key)
	if !ok {
		return 0, Placement{}, false
	}
	v, err := keys.DecodePlacement(kv.Value)
	if err == nil {
		err = ring.ValidateNodeID(v.Node)
	}
	if err != nil {
		r.Log.Warn("ignoring undecodable placement", "key", string(kv.Key), "error", err)
		return 0, Placement{}, false
	}
	return p, Placement{Placement: v, ModRev: kv.ModRevision}, true
}

// placementPartition returns the partition of a placement key, ok false
// for a key that is none or names a partition outside [0, P).
func (r *Reader) placementPartition(key []byte) (int, bool) {
	p, ok := r.Layout.PlacementPartition(string(key))
	if !ok || p >= ring.MaxPartitions {
		r.Log.Warn("ignoring placement key", "key", string(key), "partitions", ring.MaxPartitions)
		return 0, false
	}
	return p, true
}

// spec decodes the spec key-value. ok is false for a spec this build
// cannot use, which is logged and ignored: readers keep the spec they use.
func (r *Reader) spec(kv *mvccpb.KeyValue) (Spec, bool) {
	s, err := DecodeStored(kv.Value, kv.ModRevision)
	if err != nil {
		r.Log.Error("ignoring a fleet spec this build cannot use", "key", string(kv.Key), "error", err)
		return Spec{}, false
	}
	return s, true
}

// DrainedID returns the node ID of a drain key. ok is false for a key
// whose ID is not a valid node ID.
func (r *Reader) DrainedID(key []byte) (string, bool) {
	id, ok := r.Layout.DrainedID(string(key))
	if !ok || ring.ValidateNodeID(id) != nil {
		r.Log.Warn("ignoring drain key with an invalid node ID", "key", string(key))
		return "", false
	}
	return id, true
}

// partition returns the partition of a claim key. It returns ok false and
// p >= 0 for a claim key outside [0, P), which it logs once, and p < 0 for
// a key that is not a claim key.
func (r *Reader) partition(key []byte) (p int, ok bool) {
	p, ok = r.Layout.ClaimPartition(string(key))
	if !ok {
		return -1, false
	}
	if p >= ring.MaxPartitions {
		if r.warned.CompareAndSwap(false, true) {
			r.Log.Error("claim for a partition beyond the configured count: the partition count does not match the fleet's",
				"key", string(key), "partitions", r.Partitions)
		}
		return p, false
	}
	return p, true
}

// ClaimOf is the claim a claim key-value holds; nil: no claim. The value
// is either form keys.DecodeClaim reads.
func ClaimOf(kv *mvccpb.KeyValue) Claim {
	if kv == nil {
		return Claim{}
	}
	c := keys.DecodeClaim(kv.Value)
	return Claim{Owner: c.Node, Epoch: keys.ClaimEpoch(kv), Lease: clientv3.LeaseID(kv.Lease), Since: c.Since}
}

// eventKind says which of the fleet's key sets a key belongs to.
type eventKind uint8

const (
	noEvents    eventKind = iota // a key of none: ignored
	claimEvents                  // the claims, with the resize keys among them
	memberEvents
	drainEvents
	placementEvents
	specEvents
)

// kindOf returns the key set key belongs to.
func (r *Reader) kindOf(key string) eventKind {
	l := r.Layout
	switch {
	case strings.HasPrefix(key, l.Claims()):
		return claimEvents
	case strings.HasPrefix(key, l.Members()):
		return memberEvents
	case strings.HasPrefix(key, l.DrainedPrefix()):
		return drainEvents
	case strings.HasPrefix(key, l.Placements()):
		return placementEvents
	case key == l.Spec():
		return specEvents
	}
	return noEvents
}

// decode decodes the events of one response of the fleet's watch, each by
// its key's set; the keys of no set are left out.
func (r *Reader) decode(evs []*clientv3.Event) []Event {
	out := make([]Event, 0, len(evs))
	for _, ev := range evs {
		k := r.kindOf(string(ev.Kv.Key))
		if k == noEvents {
			continue
		}
		e := Event{Rev: ev.Kv.ModRevision, Member: k == memberEvents, Drain: k == drainEvents, Place: k == placementEvents,
			Spec: k == specEvents, Put: ev.Type == clientv3.EventTypePut}
		var ok bool
		switch {
		case e.Member && e.Put:
			e.ID, e.Rec, ok = r.member(ev.Kv)
		case e.Member:
			e.ID, ok = r.Layout.MemberID(string(ev.Kv.Key))
		case e.Drain:
			e.ID, ok = r.DrainedID(ev.Kv.Key)
		case e.Place && e.Put:
			e.P, e.Placement, ok = r.placement(ev.Kv)
			if !ok { // an entry this reader ignores counts as none
				e.P, ok = r.placementPartition(ev.Kv.Key)
				e.Put = false
			}
		case e.Place:
			e.P, ok = r.placementPartition(ev.Kv.Key)
		case e.Spec:
			ok = e.Put // a deleted spec changes nothing: nodes keep the one they use
			if ok {
				e.SpecRec, ok = r.spec(ev.Kv)
			}
		case k == claimEvents && r.resizeKey(ev.Kv.Key):
			e.Resize, ok = r.resizeEvent(ev), true
		default:
			e.P, ok = r.partition(ev.Kv.Key)
			if ok && e.Put {
				e.Claim = ClaimOf(ev.Kv)
			}
		}
		if ok {
			out = append(out, e)
		}
	}
	return out
}

// resizeKey reports whether key, under the claim prefix, is a resize key.
func (r *Reader) resizeKey(key []byte) bool {
	return len(key) >= len(r.Layout.Resizes()) && string(key[:len(r.Layout.Resizes())]) == r.Layout.Resizes()
}

// resizeEvent decodes the event of a resize key. A key that does not parse
// is an event of no group of no resize, which the State ignores; a record
// that does not decode is logged and read as deleted.
func (r *Reader) resizeEvent(ev *clientv3.Event) *ResizeEvent {
	rk, ok := r.Layout.ParseResize(string(ev.Kv.Key))
	if !ok {
		r.Log.Warn("ignoring resize key", "key", string(ev.Kv.Key))
		return &ResizeEvent{Key: keys.ResizeKey{ID: "\x00"}}
	}
	e := &ResizeEvent{Key: rk}
	if !rk.Record {
		return e
	}
	v := ev.Kv
	if ev.Type != clientv3.EventTypePut {
		v = ev.PrevKv // nil on the fleet's watch: the State takes the record its shape knows
	}
	if v != nil {
		if rs, err := keys.DecodeResize(v.Value, ring.MaxPartitions); err == nil {
			e.Record = &rs
		} else {
			r.Log.Warn("ignoring undecodable resize record", "key", string(ev.Kv.Key), "error", err)
		}
	}
	return e
}

// shape decodes the fleet's shape from the spec key-value (nil: none; the
// Reader's Partitions then) and the resize keys among the claim
// key-values: the resize of the spec's record, if its record stands, with
// its moving and done groups; the keys of any other resize are ignored.
func (r *Reader) shape(spec *mvccpb.KeyValue, claims []*mvccpb.KeyValue) *Shape {
	s := NewShape(r.Partitions, 0)
	if spec != nil {
		s.SpecRev = spec.ModRevision
		if sp, err := DecodeSpec(spec.Value); err == nil {
			s.Partitions = sp.Partitions
		}
	}
	var recs []*keys.Resize
	groups := map[string][]keys.ResizeKey{}
	revs := map[keys.ResizeKey]int64{}
	for _, kv := range claims {
		if !r.resizeKey(kv.Key) {
			continue
		}
		rk, ok := r.Layout.ParseResize(string(kv.Key))
		if !ok {
			continue
		}
		if rk.Record {
			if rs, err := keys.DecodeResize(kv.Value, ring.MaxPartitions); err == nil && rs.From == s.Partitions {
				recs = append(recs, &rs)
			}
			continue
		}
		groups[rk.ID] = append(groups[rk.ID], rk)
		revs[rk] = kv.CreateRevision
	}
	if len(recs) != 1 {
		s.index()
		return s
	}
	s.Resize, s.Done, s.Moving, s.Back, s.Fenced = recs[0], map[int]int64{}, map[int]bool{}, map[int]int64{}, map[int]bool{}
	for _, rk := range groups[s.Resize.ID] {
		switch {
		case rk.Moving:
			s.Moving[rk.Group] = true
		case rk.Back:
			s.Back[rk.Group] = revs[rk]
		case rk.Fenced:
			s.Fenced[rk.Group] = true
		default:
			s.Done[rk.Group] = revs[rk]
		}
	}
	s.index()
	return s
}
