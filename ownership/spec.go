package ownership

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
)

// RingAlgorithm is the version of the ring's assignment algorithm that this
// build computes. Nodes that compute rings differently must never share a
// fleet, so it is part of the fleet's Spec.
const RingAlgorithm = 1

// Spec is a fleet's fixed configuration: what every node and every outside
// client must agree on to hash a key to the same partition and a partition
// to the same owner. It is stored once in etcd, at <prefix>spec, by the
// first node that joins (create-if-absent), and never changed by a node.
// Join refuses a node whose configuration contradicts it with a
// *SpecMismatchError, or adopts it (Config.AdoptSpec); router.NewClient
// reads it instead of being told.
type Spec struct {
	// Partitions is the fleet's partition count P.
	Partitions int `json:"partitions"`
	// LoadFactor is the ring's bounded-load factor.
	LoadFactor float64 `json:"load_factor"`
	// RingAlgorithm is the version of the ring algorithm (RingAlgorithm).
	RingAlgorithm int `json:"ring_algorithm"`
}

// Spec returns the fleet spec of c with this build's ring algorithm.
func (c RingConfig) Spec() Spec {
	return Spec{Partitions: c.Partitions, LoadFactor: c.LoadFactor, RingAlgorithm: RingAlgorithm}
}

// RingConfig returns the ring configuration of s.
func (s Spec) RingConfig() RingConfig {
	return RingConfig{Partitions: s.Partitions, LoadFactor: s.LoadFactor}
}

// Validate reports whether s can be used by this build: a valid ring
// configuration and a ring algorithm this build computes. Errors wrap
// ErrInvalidSpec.
func (s Spec) Validate() error {
	if err := s.RingConfig().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	if s.RingAlgorithm != RingAlgorithm {
		return fmt.Errorf("%w: ring algorithm %d (this build computes %d)", ErrInvalidSpec, s.RingAlgorithm, RingAlgorithm)
	}
	return nil
}

// SpecMismatchError reports a configuration that contradicts the fleet's
// spec in etcd. errors.Is(err, ErrSpecMismatch) holds.
type SpecMismatchError struct {
	// Field names the first field that differs: "partitions", "load factor"
	// or "ring algorithm".
	Field string
	// Fleet is the spec stored in etcd; Local is the one this process was
	// configured with.
	Fleet, Local Spec
}

// Error implements error.
func (e *SpecMismatchError) Error() string {
	var local, fleet string
	switch e.Field {
	case "partitions":
		local, fleet = strconv.Itoa(e.Local.Partitions), strconv.Itoa(e.Fleet.Partitions)
	case "load factor":
		local, fleet = fmt.Sprint(e.Local.LoadFactor), fmt.Sprint(e.Fleet.LoadFactor)
	default:
		local, fleet = strconv.Itoa(e.Local.RingAlgorithm), strconv.Itoa(e.Fleet.RingAlgorithm)
	}
	return "ownership: configuration contradicts the fleet's spec: " + e.Field + " " + local +
		" here, " + fleet + " in the fleet (a fleet's spec never changes; use a new cluster name or prefix for a new one)"
}

// Is reports whether target is ErrSpecMismatch.
func (e *SpecMismatchError) Is(target error) bool { return target == ErrSpecMismatch }

// compare returns a *SpecMismatchError if local differs from fleet.
func compareSpec(fleet, local Spec) error {
	field := ""
	switch {
	case fleet.Partitions != local.Partitions:
		field = "partitions"
	case fleet.LoadFactor != local.LoadFactor:
		field = "load factor"
	case fleet.RingAlgorithm != local.RingAlgorithm:
		field = "ring algorithm"
	default:
		return nil
	}
	return &SpecMismatchError{Field: field, Fleet: fleet, Local: local}
}

// decodeSpec parses and validates a stored spec.
func decodeSpec(b []byte) (Spec, error) {
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return Spec{}, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// ReadSpec reads the spec of the fleet whose keys live under prefix (see
// DefaultPrefix). It returns an error wrapping ErrNoSpec if no node has
// created it yet, or ErrInvalidSpec if it cannot be used by this build.
func ReadSpec(ctx context.Context, kv clientv3.KV, prefix string) (Spec, error) {
	return readSpec(ctx, kv, keys.ForPrefix(prefix))
}

// DefaultPrefix returns the key prefix of cluster when no Prefix is
// configured: "/tenure/<cluster>/".
func DefaultPrefix(cluster string) string { return keys.DefaultPrefix(cluster) }

func readSpec(ctx context.Context, kv clientv3.KV, layout keys.Layout) (Spec, error) {
	resp, err := kv.Get(ctx, layout.Spec())
	if err != nil {
		return Spec{}, fmt.Errorf("ownership: read the fleet's spec: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return Spec{}, fmt.Errorf("%w at %s", ErrNoSpec, layout.Spec())
	}
	return decodeSpec(resp.Kvs[0].Value)
}

// ensureSpec creates the fleet's spec as local if it does not exist, and
// returns the spec the node must use: local if it created it or the stored
// one equals it; the stored one if adopt is set (AdoptSpec); otherwise a
// *SpecMismatchError. Creating and reading back are one transaction, so
// nodes that race to create the spec all see the one that won.
func ensureSpec(ctx context.Context, kv clientv3.KV, layout keys.Layout, local Spec, adopt bool) (Spec, error) {
	val, err := json.Marshal(local)
	if err != nil {
		return Spec{}, fmt.Errorf("ownership: encode spec: %w", err)
	}
	k := layout.Spec()
	resp, err := kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(val))).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		return Spec{}, fmt.Errorf("ownership: create or read the fleet's spec: %w", err)
	}
	if resp.Succeeded {
		return local, nil
	}
	var stored []byte
	if len(resp.Responses) > 0 {
		if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			stored = rr.Kvs[0].Value
		}
	}
	fleet, err := decodeSpec(stored)
	if err != nil {
		return Spec{}, err
	}
	if adopt {
		return fleet, nil
	}
	return local, compareSpec(fleet, local)
}
