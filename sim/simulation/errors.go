package simulation

import "errors"

// ErrInvalidConfig reports a Config that cannot run, or an unknown
// strategy name.
var ErrInvalidConfig = errors.New("simulation: invalid config")
