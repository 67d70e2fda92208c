package sqlfence

import "errors"

var (
	// ErrInvalidConfig reports a Config that cannot be used, or a Fencer
	// without a database or Fences.
	ErrInvalidConfig = errors.New("sqlfence: invalid config")

	// ErrInvalidQuery reports an empty statement given to Exec.
	ErrInvalidQuery = errors.New("sqlfence: invalid query")
)
