package sqlfence

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tenure-go/tenure/fence"
)

var (
	// ErrInvalidConfig reports a Config that cannot be used, or a Fencer
	// without a database or Fences.
	ErrInvalidConfig = errors.New("sqlfence: invalid config")

	// ErrInvalidQuery reports a statement that Exec or ExecGuarded cannot
	// run: an empty one, or one given to ExecGuarded that never reads Guard;
	// or a Writer.Write that returned another number of results than it
	// was given writes.
	ErrInvalidQuery = errors.New("sqlfence: invalid query")

	// ErrMetrics reports metrics that New could not register with
	// Config.Metrics; the registry's error is wrapped as well.
	ErrMetrics = errors.New("sqlfence: cannot register metrics")

	// ErrClosed reports a write given to a Batcher after Close.
	ErrClosed = errors.New("sqlfence: batcher closed")

	// ErrNilArgument reports a required argument that is nil, or an
	// interface holding a nil pointer: a context, a Queryer (such as a nil
	// *sql.Tx), a *sql.DB, a *Fences or a function. A Fencer whose DB or
	// Fences is nil gives an error that matches both ErrNilArgument and
	// ErrInvalidConfig.
	ErrNilArgument = errors.New("sqlfence: nil argument")
)

// nilError reports a nil argument, or a nil field of a configuration
// struct (then it matches ErrInvalidConfig too). It says the package
// prefix once.
type nilError struct {
	what  string // "Queryer (*sql.Tx)", "Fencer.DB"
	field bool
}

func (e *nilError) Error() string {
	if e.field {
		return "sqlfence: invalid config: " + e.what + " is nil"
	}
	return "sqlfence: nil argument: " + e.what
}

func (e *nilError) Unwrap() []error {
	if e.field {
		return []error{ErrNilArgument, ErrInvalidConfig}
	}
	return []error{ErrNilArgument}
}

// StaleTokensError reports the tokens that AdvanceAll refused because
// their scopes' floors were already above their epochs; the other tokens
// were advanced. errors.Is(err, fence.ErrStale) holds, and errors.As finds
// each *fence.StaleError.
type StaleTokensError struct {
	// Stale holds one *fence.StaleError per refused token, ordered by
	// scope, with the scope's current epoch.
	Stale []*fence.StaleError
	// Advanced is the number of the other tokens, whose floors were raised
	// or confirmed.
	Advanced int
}

// maxListed bounds the stale tokens an error message lists.
const maxListed = 8

// Error implements error, listing the first stale tokens.
func (e *StaleTokensError) Error() string {
	var sb strings.Builder
	noun := " stale tokens ("
	if len(e.Stale) == 1 {
		noun = " stale token ("
	}
	sb.WriteString("sqlfence: " + strconv.Itoa(len(e.Stale)) + noun + strconv.Itoa(e.Advanced) + " others advanced): ")
	for i, se := range e.Stale {
		if i == maxListed {
			sb.WriteString(", and " + strconv.Itoa(len(e.Stale)-maxListed) + " more")
			break
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%q epoch %d < current epoch %d", se.Scope, se.Presented, se.Current)
	}
	return sb.String()
}

// Unwrap returns the *fence.StaleErrors, for errors.Is and errors.As.
func (e *StaleTokensError) Unwrap() []error {
	out := make([]error, len(e.Stale))
	for i, se := range e.Stale {
		out[i] = se
	}
	return out
}
