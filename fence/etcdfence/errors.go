package etcdfence

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig reports a Config or BatcherConfig that cannot be used.
	ErrInvalidConfig = errors.New("etcdfence: invalid config")

	// ErrNilArgument reports a required argument that is nil, a typed nil
	// included (such as a nil *clientv3.Client passed as the etcd KV, or a
	// nil *Store). It wraps ErrInvalidConfig.
	ErrNilArgument = fmt.Errorf("%w: nil argument", ErrInvalidConfig)

	// ErrNoFleet reports a Config that names no fleet: neither Cluster nor
	// ClusterPrefix. A Store's floors belong to one fleet, so there is no
	// default. It wraps ErrInvalidConfig.
	ErrNoFleet = fmt.Errorf("%w: no fleet named (set Cluster or ClusterPrefix, as in the node's ownership.Config)", ErrInvalidConfig)

	// ErrMetrics reports metrics that New could not register; the
	// registry's error (such as a prometheus.AlreadyRegisteredError) is
	// wrapped as well.
	ErrMetrics = errors.New("etcdfence: cannot register metrics")

	// ErrInvalidKey reports a data key the store cannot accept: empty,
	// longer than Config.MaxKeyLen once the store's prefix is added, or
	// inside the fence prefix where the floors live.
	ErrInvalidKey = errors.New("etcdfence: invalid key")

	// ErrInvalidWrite reports a write the store cannot accept: a value
	// longer than Config.MaxValueLen, or a Write whose Kind is unknown or
	// whose fields do not fit its kind.
	ErrInvalidWrite = errors.New("etcdfence: invalid write")

	// ErrVersionMismatch reports a compare-and-swap whose key did not have
	// the expected version. Every *VersionError matches it.
	ErrVersionMismatch = errors.New("etcdfence: version mismatch")

	// ErrCorruptFloor reports a floor key whose value is not an epoch
	// written by this package.
	ErrCorruptFloor = errors.New("etcdfence: corrupt floor")

	// ErrClosed reports a write submitted to a Batcher after Close.
	ErrClosed = errors.New("etcdfence: batcher closed")
)

// VersionError is the error of a compare-and-swap whose key did not have the
// expected version. errors.Is(err, ErrVersionMismatch) holds.
type VersionError struct {
	// Key is the key as the caller named it (without the store's prefix).
	Key string
	// Expected is the version the caller asked for (0: absent).
	Expected int64
	// Actual is the key's version when the swap was refused (0: absent).
	Actual int64
}

// Error implements error.
func (e *VersionError) Error() string {
	return fmt.Sprintf("etcdfence: version mismatch on key %q: expected %d, found %d", e.Key, e.Expected, e.Actual)
}

// Is reports whether target is ErrVersionMismatch.
func (e *VersionError) Is(target error) bool { return target == ErrVersionMismatch }
