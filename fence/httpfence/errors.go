package httpfence

import "errors"

var (
	// ErrNilArgument reports a required argument or Config field that is
	// nil, a typed nil included (such as a nil *etcdfence.Store passed as the
	// fence.Fencer, or a nil http.HandlerFunc).
	ErrNilArgument = errors.New("httpfence: nil argument")

	// ErrMetrics reports metrics that New could not register with
	// Config.Metrics (a different collector holds one of their names); the
	// error also wraps the registry's.
	ErrMetrics = errors.New("httpfence: cannot register metrics")

	// ErrInvalidRefusal reports a response that names a refusal in its
	// RefusalHeader but whose refusal cannot be read (a body that is not
	// the refusal's JSON, a kind that does not match, a negative epoch),
	// or a Refusal that WriteRefusal cannot write. A malformed refusal is
	// never returned as a *Refusal.
	ErrInvalidRefusal = errors.New("httpfence: invalid refusal")
)
