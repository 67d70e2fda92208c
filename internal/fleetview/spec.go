package fleetview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
)

// storedSpec is a ring.Spec as etcd stores it: the algorithm as its
// number. Every build of tenure reads and writes this form.
type storedSpec struct {
	Partitions    int     `json:"partitions"`
	LoadFactor    float64 `json:"load_factor"`
	RingAlgorithm int     `json:"ring_algorithm"`
	// Requires are the protocol features in use (see Features): a build
	// that lacks one is refused at Join. A build from before features were
	// recorded ignores it.
	Requires []string `json:"requires,omitempty"`
	// Resize is the resize of the partition count in progress; a build
	// that ignores it reads Partitions, the count before the resize.
	Resize *keys.Resize `json:"resize,omitempty"`
}

// Spec is the fleet's spec as etcd stores it: the ring's spec, the
// protocol features in use, the resize of the partition count in progress
// (nil: none), and the revision the spec key was last written at (0: not
// read from etcd). Every writer of the spec writes all of it, so that
// none drops what another recorded.
type Spec struct {
	ring.Spec
	Requires []string
	Resize   *keys.Resize
	ModRev   int64
}

// checkSpec reports whether s can be used by this build: a valid ring
// configuration and a ring algorithm this build computes. Errors wrap
// ring.ErrInvalidSpec.
func checkSpec(s ring.Spec) error {
	if err := s.Config().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ring.ErrInvalidSpec, err)
	}
	if s.RingAlgorithm == 0 {
		return fmt.Errorf("%w: no ring algorithm (this build computes %d, %v, and %d, %v)", ring.ErrInvalidSpec,
			int(ring.AlgorithmBounded), ring.AlgorithmBounded, int(ring.AlgorithmWeighted), ring.AlgorithmWeighted)
	}
	return nil
}

// EncodeSpec returns the stored form of s: its JSON encoding with the
// algorithm as its number ({"partitions":1024,"load_factor":1.25,
// "ring_algorithm":2}). A spec this build cannot use is an error wrapping
// ring.ErrInvalidSpec, so that none is stored.
func EncodeSpec(s ring.Spec) ([]byte, error) { return EncodeStored(Spec{Spec: s}) }

// EncodeStored returns the stored form of s with its requires, as
// EncodeSpec.
func EncodeStored(s Spec) ([]byte, error) {
	if err := checkSpec(s.Spec); err != nil {
		return nil, err
	}
	return json.Marshal(storedSpec{Partitions: s.Partitions, LoadFactor: s.LoadFactor, RingAlgorithm: int(s.RingAlgorithm), Requires: s.Requires,
		Resize: s.Resize})
}

// DecodeSpec parses a stored spec (see EncodeSpec) and checks that this
// build can use it: a valid ring configuration and a ring algorithm this
// build computes. Errors wrap ring.ErrInvalidSpec.
func DecodeSpec(b []byte) (ring.Spec, error) {
	s, err := DecodeStored(b, 0)
	return s.Spec, err
}

// DecodeStored parses a stored spec with its requires, as DecodeSpec;
// modRev is the spec key's ModRevision.
func DecodeStored(b []byte, modRev int64) (Spec, error) {
	var st storedSpec
	if err := json.Unmarshal(b, &st); err != nil {
		return Spec{}, fmt.Errorf("%w: %w", ring.ErrInvalidSpec, err)
	}
	s := ring.Spec{Partitions: st.Partitions, LoadFactor: st.LoadFactor, RingAlgorithm: ring.Algorithm(st.RingAlgorithm)}
	if err := checkSpec(s); err != nil {
		return Spec{}, err
	}
	return Spec{Spec: s, Requires: st.Requires, Resize: st.Resize, ModRev: modRev}, nil
}

// requiresOf returns the features a spec of algorithm a records in use
// from its creation: FeatureWeightedRing for the weighted ring.
func requiresOf(a ring.Algorithm) []string {
	if a == ring.AlgorithmWeighted {
		return []string{FeatureWeightedRing}
	}
	return nil
}

// EnsureSpec creates the fleet's spec as local.Spec() (an unset algorithm
// is ring.AlgorithmWeighted) if it does not exist, and returns the spec the
// node must use: the one it created, or the stored one if local agrees with
// it (ring.Spec.CompareConfig: an unset algorithm adopts the stored one's)
// or adopt is set; otherwise a *ring.SpecMismatchError. Creating and
// reading back are one transaction, so nodes that race to create the spec
// all see the one that won.
func EnsureSpec(ctx context.Context, kv clientv3.KV, layout keys.Layout, local ring.Config, adopt bool) (Spec, error) {
	created := Spec{Spec: local.Spec()}
	created.Requires = requiresOf(created.RingAlgorithm)
	val, err := EncodeStored(created)
	if err != nil {
		return Spec{}, fmt.Errorf("fleet: encode spec: %w", err)
	}
	k := layout.Spec()
	resp, err := kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(val))).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		return Spec{}, fmt.Errorf("fleet: create or read the fleet's spec: %w", err)
	}
	if resp.Succeeded {
		created.ModRev = resp.Header.Revision
		return created, nil
	}
	var stored []byte
	var modRev int64
	if len(resp.Responses) > 0 {
		if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			stored, modRev = rr.Kvs[0].Value, rr.Kvs[0].ModRevision
		}
	}
	fleet, err := DecodeStored(stored, modRev)
	if err != nil {
		return Spec{}, err
	}
	if adopt {
		return fleet, nil
	}
	if err := CompareSpec(fleet, local); err != nil {
		return Spec{}, err
	}
	return fleet, nil
}

// CompareSpec is fleet.CompareConfig(local): a *ring.SpecMismatchError
// on the partition count names the count a resize in progress moves to.
func CompareSpec(fleet Spec, local ring.Config) error {
	err := fleet.CompareConfig(local)
	var me *ring.SpecMismatchError
	if errors.As(err, &me) && fleet.Resize != nil {
		me.ResizingTo = fleet.Resize.To
		if fleet.Resize.Aborting {
			me.ResizingTo = fleet.Resize.From
		}
	}
	return err
}
