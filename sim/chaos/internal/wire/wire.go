// Package wire is what a chaos worker and its runner share: the JSON lines
// a worker writes on its standard output, and the counter value it keeps in
// the fenced store.
package wire

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Kinds of Event.
const (
	// Listening: the worker serves HTTP at Addr.
	Listening = "listening"
	// Joined: the worker's node joined the fleet.
	Joined = "joined"
	// Acquired: the node began serving partition P under Epoch.
	Acquired = "acquired"
	// Released: the node's tenure of P under Epoch ended, for Reason.
	Released = "released"
	// Invoke: the worker is about to send write W (a compare-and-swap of
	// Key, which read Read, to Value) under Scope@Epoch.
	Invoke = "invoke"
	// Return: write W's outcome (Outcome), and the error, if any.
	Return = "return"
	// Failed: the worker gives up (Err); it exits after this line.
	Failed = "failed"
	// Stopping: the worker, armed by SIGUSR1, has read Key for write W
	// under Scope@Epoch and stops itself (SIGSTOP) before it writes.
	Stopping = "stopping"
)

// Outcomes of a write.
const (
	Accepted = "accepted"
	// Stale: the store refused the token.
	Stale = "stale"
	// Conflict: the compare-and-swap found another version; nothing was
	// written.
	Conflict = "conflict"
	// Unknown: the worker cannot tell whether the write took effect.
	Unknown = "unknown"
)

// Event is one line of a worker's standard output.
type Event struct {
	Kind string `json:"ev"`
	// T is the worker's wall clock, Unix nanoseconds. Workers and runner
	// share a host.
	T       int64  `json:"t"`
	Addr    string `json:"addr,omitempty"`
	P       int    `json:"p,omitempty"`
	Epoch   int64  `json:"epoch,omitempty"`
	Reason  string `json:"reason,omitempty"`
	W       string `json:"w,omitempty"`
	Key     string `json:"key,omitempty"`
	Scope   string `json:"scope,omitempty"`
	Read    string `json:"read,omitempty"`
	Value   string `json:"value,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Err     string `json:"err,omitempty"`
}

// Counter is the value of one counter key: its count, the write that set
// it (unique per key, so the store's values form a chain), and the
// idempotency keys of the last increments applied.
type Counter struct {
	N   int64    `json:"n"`
	W   string   `json:"w"`
	IDs []string `json:"ids,omitempty"`
}

// KeepIDs is how many idempotency keys a Counter remembers. A key has one
// client increment outstanding at a time and a worker refuses an attempt
// past its AttemptDeadline, so the window needs to cover one attempt's
// lifetime (about a second, a few dozen increments of a busy key), not
// the longest pause of a worker.
const KeepIDs = 128

// AttemptDeadline is the request header with which the runner's transport
// stamps every attempt: the Unix nanoseconds after which the client has
// given the attempt up. A worker that finds it passed (a request that
// waited in the socket of a paused worker, which may since have rejoined
// and own the key again under a newer, valid token) refuses the attempt
// instead of applying an increment that may since have been applied
// elsewhere and dropped from its counter's window.
const AttemptDeadline = "Chaos-Attempt-Deadline"

// DecodeCounter parses a stored counter; empty means a counter at 0.
func DecodeCounter(b []byte) (Counter, error) {
	var c Counter
	if len(b) == 0 {
		return c, nil
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("corrupt counter %q: %w", b, err)
	}
	return c, nil
}

// Encode returns the stored form of c.
func (c Counter) Encode() []byte {
	b, _ := json.Marshal(c)
	return b
}

// Has reports whether the increment idem was applied.
func (c Counter) Has(idem string) bool { return slices.Contains(c.IDs, idem) }

// Next returns the counter after increment idem, applied by write w.
func (c Counter) Next(idem, w string) Counter {
	ids := append(slices.Clone(c.IDs), idem)
	if len(ids) > KeepIDs {
		ids = ids[len(ids)-KeepIDs:]
	}
	return Counter{N: c.N + 1, W: w, IDs: ids}
}

// CounterKey is the store key of routing key k's counter.
func CounterKey(k string) string { return "counters/" + k }
