// Package errs builds tenure's errors whose message nests another package's
// error, so that each package prefix appears once: "ownership: invalid
// config: session: TTL 1s must be at least 2s", not "ownership: invalid
// config: session: election: invalid config: TTL 1s ...". errors.Is and
// errors.As see every sentinel and error involved.
package errs

import "fmt"

// Error is a sentinel (its kind) with a detail and an optional cause.
type Error struct {
	kind   error
	detail string
	cause  error
}

// New returns an error of kind whose message is kind's message, ": " and
// the formatted detail. errors.Is(err, kind) holds. A %w verb in format is
// not supported; use Nest to wrap a cause.
func New(kind error, format string, args ...any) *Error {
	return &Error{kind: kind, detail: fmt.Sprintf(format, args...)}
}

// Nest returns an error of kind about inner, another package's error, seen
// in context (a field or step, such as "session"): its message is kind's
// message, ": ", context, ": " and inner's detail, which is inner's message
// without its own package prefix when inner is an *Error.
// errors.Is and errors.As see kind, inner and everything inner wraps.
func Nest(kind error, context string, inner error) *Error {
	d := inner.Error()
	if e, ok := inner.(*Error); ok {
		d = e.Detail()
	}
	if context != "" {
		d = context + ": " + d
	}
	return &Error{kind: kind, detail: d, cause: inner}
}

// Error implements error.
func (e *Error) Error() string { return e.kind.Error() + ": " + e.detail }

// Detail returns the message without the kind's prefix.
func (e *Error) Detail() string { return e.detail }

// Unwrap returns the kind and the cause, if any.
func (e *Error) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}
