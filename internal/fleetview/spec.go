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
	// Resize is the resize of the partition count in progress; a build
	// that ignores it reads Partitions, the count before the resize.
	Resize *keys.Resize `json:"resize,omitempty"`
}

// EncodeSpecResize returns the stored form of s with the resize rs in
// progress (nil: none).
func EncodeSpecResize(s ring.Spec, rs *keys.Resize) ([]byte, error) {
	if err := checkSpec(s); err != nil {
		return nil, err
	}
	return json.Marshal(storedSpec{Partitions: s.Partitions, LoadFactor: s.LoadFactor, RingAlgorithm: int(s.RingAlgorithm), Resize: rs})
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
func EncodeSpec(s ring.Spec) ([]byte, error) {
	if err := checkSpec(s); err != nil {
		return nil, err
	}
	return json.Marshal(storedSpec{Partitions: s.Partitions, LoadFactor: s.LoadFactor, RingAlgorithm: int(s.RingAlgorithm)})
}

// DecodeSpec parses a stored spec (see EncodeSpec) and checks that this
// build can use it: a valid ring configuration and a ring algorithm this
// build computes. Errors wrap ring.ErrInvalidSpec.
func DecodeSpec(b []byte) (ring.Spec, error) {
	var st storedSpec
	if err := json.Unmarshal(b, &st); err != nil {
		return ring.Spec{}, fmt.Errorf("%w: %w", ring.ErrInvalidSpec, err)
	}
	s := ring.Spec{Partitions: st.Partitions, LoadFactor: st.LoadFactor, RingAlgorithm: ring.Algorithm(st.RingAlgorithm)}
	if err := checkSpec(s); err != nil {
		return ring.Spec{}, err
	}
	return s, nil
}

// EnsureSpec creates the fleet's spec as local.Spec() (an unset algorithm
// is ring.AlgorithmWeighted) if it does not exist, and returns the spec the
// node must use: the one it created, or the stored one if local agrees with
// it (ring.Spec.CompareConfig: an unset algorithm adopts the stored one's)
// or adopt is set; otherwise a *ring.SpecMismatchError. Creating and
// reading back are one transaction, so nodes that race to create the spec
// all see the one that won.
func EnsureSpec(ctx context.Context, kv clientv3.KV, layout keys.Layout, local ring.Config, adopt bool) (ring.Spec, error) {
	created := local.Spec()
	val, err := EncodeSpec(created)
	if err != nil {
		return ring.Spec{}, fmt.Errorf("fleet: encode spec: %w", err)
	}
	k := layout.Spec()
	resp, err := kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(val))).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		return ring.Spec{}, fmt.Errorf("fleet: create or read the fleet's spec: %w", err)
	}
	if resp.Succeeded {
		return created, nil
	}
	var stored []byte
	if len(resp.Responses) > 0 {
		if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			stored = rr.Kvs[0].Value
		}
	}
	fleet, err := DecodeSpec(stored)
	if err != nil {
		return ring.Spec{}, err
	}
	if adopt {
		return fleet, nil
	}
	if err := CompareSpec(stored, fleet, local); err != nil {
		return ring.Spec{}, err
	}
	return fleet, nil
}

// CompareSpec is fleet.CompareConfig(local) for fleet, the spec decoded
// from stored: a *ring.SpecMismatchError on the partition count names the
// count a resize in progress moves to.
func CompareSpec(stored []byte, fleet ring.Spec, local ring.Config) error {
	err := fleet.CompareConfig(local)
	var me *ring.SpecMismatchError
	if errors.As(err, &me) {
		var st storedSpec
		if json.Unmarshal(stored, &st) == nil && st.Resize != nil {
			me.ResizingTo = st.Resize.To
			if st.Resize.Aborting {
				me.ResizingTo = st.Resize.From
			}
		}
	}
	return err
}
