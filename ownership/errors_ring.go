package ownership

import "errors"

var (
	// ErrInvalidPartitions reports a partition count outside
	// [1, MaxPartitions].
	ErrInvalidPartitions = errors.New("ownership: invalid partition count")

	// ErrInvalidLoadFactor reports a load factor that is below 1, NaN or
	// infinite.
	ErrInvalidLoadFactor = errors.New("ownership: invalid load factor")

	// ErrInvalidNodeID reports a node ID that ValidateNodeID rejects: empty,
	// longer than MaxNodeIDLen bytes, not valid UTF-8, or containing '/',
	// white space, or a control or other non-printable character.
	ErrInvalidNodeID = errors.New("ownership: invalid node ID")

	// ErrDuplicateNodeID reports a node ID that appears more than once where
	// IDs must be unique, such as the member list of a ring.
	ErrDuplicateNodeID = errors.New("ownership: duplicate node ID")

	// ErrRingMismatch reports two rings that cannot be compared because they
	// have different partition counts.
	ErrRingMismatch = errors.New("ownership: rings have different partition counts")
)
