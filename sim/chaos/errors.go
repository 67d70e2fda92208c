package chaos

import "errors"

// ErrInvalidConfig reports a Config that cannot run. The text names the
// values.
var ErrInvalidConfig = errors.New("chaos: invalid config")

// ErrViolation reports a run whose checks found a violation; the Report
// lists them.
var ErrViolation = errors.New("chaos: violation")
