// Package errs nests one package's error in another's, so that each
// package prefix appears once: "ownership: invalid config: session: TTL 1s
// must be at least 2s", not "ownership: invalid config: session: election:
// invalid config: TTL 1s ...". errors.Is and errors.As see every sentinel
// and error involved.
//
// An error of one package is built one way, fmt.Errorf("%w: detail",
// ErrSentinel); Nest is only for an error that carries another's.
package errs

import "strings"

// nested is a sentinel (its kind) with a detail and a cause.
type nested struct {
	kind   error
	detail string
	cause  error
}

// Nest returns an error of kind about inner, another package's error, seen
// in context (a field or step, such as "session"): its message is kind's
// message, ": ", context, ": " and inner's detail, inner's message without
// the message of the first error inner wraps when it begins with it (its
// sentinel, for an error built as fmt.Errorf("%w: detail", ErrSentinel) or
// by Nest). errors.Is and errors.As see kind, inner and everything inner
// wraps.
func Nest(kind error, context string, inner error) error {
	d := detail(inner)
	if context != "" {
		d = context + ": " + d
	}
	return &nested{kind: kind, detail: d, cause: inner}
}

// detail returns err's message without the message of the first error it
// wraps and the ": " after it, if it begins so; otherwise its message.
func detail(err error) string {
	msg := err.Error()
	var first error
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		first = u.Unwrap()
	case interface{ Unwrap() []error }:
		if es := u.Unwrap(); len(es) > 0 {
			first = es[0]
		}
	}
	if first == nil {
		return msg
	}
	if d, ok := strings.CutPrefix(msg, first.Error()+": "); ok {
		return d
	}
	return msg
}

// Error implements error.
func (e *nested) Error() string { return e.kind.Error() + ": " + e.detail }

// Unwrap returns the kind and the cause.
func (e *nested) Unwrap() []error { return []error{e.kind, e.cause} }
