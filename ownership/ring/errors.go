package ring

import "errors"

var (
	// ErrInvalidPartitions reports a partition count outside
	// [1, MaxPartitions].
	ErrInvalidPartitions = errors.New("ring: invalid partition count")

	// ErrInvalidLoadFactor reports a load factor that is below 1, NaN or
	// infinite.
	ErrInvalidLoadFactor = errors.New("ring: invalid load factor")

	// ErrInvalidAlgorithm reports a ring algorithm this build does not
	// compute.
	ErrInvalidAlgorithm = errors.New("ring: invalid ring algorithm")

	// ErrInvalidWeight reports a capacity weight outside [0, MaxWeight].
	ErrInvalidWeight = errors.New("ring: invalid capacity weight")

	// ErrInvalidNodeID reports a node ID that ValidateNodeID rejects: empty,
	// longer than MaxNodeIDLen bytes, not valid UTF-8, or containing '/',
	// white space, or a control or other non-printable character.
	ErrInvalidNodeID = errors.New("ring: invalid node ID")

	// ErrDuplicateNodeID reports a node ID that appears more than once where
	// IDs must be unique, such as the member list of a ring.
	ErrDuplicateNodeID = errors.New("ring: duplicate node ID")

	// ErrSpecMismatch reports a configuration that contradicts the fleet's
	// spec in etcd (partition count, load factor or ring algorithm). The
	// error is a *SpecMismatchError naming both values.
	ErrSpecMismatch = errors.New("ring: configuration contradicts the fleet's spec")

	// ErrInvalidSpec reports a stored spec that this build cannot use:
	// undecodable, invalid, or of another ring algorithm.
	ErrInvalidSpec = errors.New("ring: invalid fleet spec")
)

// ErrFeatureUnsupported reports a protocol feature that a build does not
// understand: a node whose build lacks a feature the fleet's spec records
// in use, refused at Join, or a command that needs a feature some live
// member's build lacks, refused until that member is upgraded or gone.
// The error names the feature and the members.
var ErrFeatureUnsupported = errors.New("ring: protocol feature not supported")
