package check

import (
	"fmt"
	"math"
	"time"
)

// Never is the time of something that did not happen during the run: the
// end of a tenure still held when the run ended, the return of an operation
// whose caller never learned its outcome. Porcupine treats an operation
// returning at Never as one that may take effect at any point after its
// invoke, or not at all.
const Never time.Duration = math.MaxInt64

// Outcome is what the caller of a write or an operation learned.
type Outcome uint8

const (
	// Unknown means the caller does not know whether the write or
	// operation took effect (a timeout, a lost connection, a crash). It is
	// the zero value: a fact recorded without an outcome is taken as
	// unknown, which never produces a violation on its own.
	Unknown Outcome = iota
	// Accepted means the store acknowledged the write or the operation
	// returned successfully.
	Accepted
	// Rejected means the write or operation definitely did not take effect
	// (for a write: the store refused its token as stale).
	Rejected
)

// String returns "unknown", "accepted" or "rejected".
func (o Outcome) String() string {
	switch o {
	case Unknown:
		return "unknown"
	case Accepted:
		return "accepted"
	case Rejected:
		return "rejected"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Tenure is one holder's tenure of a scope under one epoch.
type Tenure struct {
	// Scope is what the tenure fences: "p/17", "leader/billing".
	Scope string
	// Epoch is the tenure's fencing token epoch.
	Epoch int64
	// Holder names the node or process that held it, in the same names
	// as Write.Writer: DoubleExecutions matches a holder's writes to its
	// tenures by name and epoch.
	Holder string
	// Start is when the tenure began (the claim was created).
	Start time.Duration
	// End is when the holder stopped admitting side effects under the
	// tenure (released, lost, or the time it crashed); Never if it still
	// held the tenure when the run ended.
	End time.Duration
}

func (t Tenure) String() string {
	end := "never"
	if t.End != Never {
		end = t.End.String()
	}
	return fmt.Sprintf("%s epoch %d held by %s [%v, %s]", t.Scope, t.Epoch, t.Holder, t.Start, end)
}

// StoreEventKind is the kind of a StoreEvent.
type StoreEventKind uint8

const (
	// FloorRaised: the store raised the scope's floor to Epoch (a new
	// owner fencing its predecessor out before its first write).
	FloorRaised StoreEventKind = iota + 1
	// WriteApplied: the store applied the write Write.
	WriteApplied
)

// String returns "floor raised" or "write applied".
func (k StoreEventKind) String() string {
	switch k {
	case FloorRaised:
		return "floor raised"
	case WriteApplied:
		return "write applied"
	}
	return fmt.Sprintf("store event(%d)", uint8(k))
}

// StoreEvent is one entry of the store's log. History.Store lists them in
// the order the store applied them, which is the order the checkers trust
// over times when both events are in the log.
type StoreEvent struct {
	Kind StoreEventKind
	// Scope and Epoch: the floor raised to (FloorRaised). A WriteApplied
	// event takes both from its write.
	Scope string
	Epoch int64
	// Write is the ID of the write applied (WriteApplied only).
	Write WriteID
	// At is when the store applied it.
	At time.Duration
}

// WriteID identifies a write attempt within a History. The zero WriteID
// identifies nothing.
type WriteID uint64

// Write is one write attempt as its writer saw it.
type Write struct {
	// ID is unique within the history and not zero.
	ID WriteID
	// Key is the store key written, Scope the scope of the token it
	// carried and Epoch that token's epoch.
	Key   string
	Scope string
	Epoch int64
	// Writer names the node or process that attempted it (as
	// Tenure.Holder does).
	Writer string
	// Invoke is when the writer sent it; Return when the writer learned
	// its outcome. Return is ignored, taken as Never, when the outcome is
	// Unknown.
	Invoke time.Duration
	Return time.Duration
	// Outcome is what the writer learned.
	Outcome Outcome
	// Value is the value written.
	Value string
	// Read is the value the writer read before computing Value, for a
	// read-modify-write (HasRead true). A blind write has HasRead false.
	Read    string
	HasRead bool
}

func (w Write) String() string {
	s := fmt.Sprintf("write #%d by %s to %q under %s@%d [%v, %s] %s value %q",
		w.ID, w.Writer, w.Key, w.Scope, w.Epoch, w.Invoke, fmtReturn(w.Outcome, w.Return), w.Outcome, w.Value)
	if w.HasRead {
		s += fmt.Sprintf(" (read %q)", w.Read)
	}
	return s
}

// OpKind is the kind of a client operation.
type OpKind uint8

const (
	// Put writes Value to a register.
	Put OpKind = iota + 1
	// Get reads a register; its output is Value.
	Get
	// Incr adds Delta to a counter once per IdemKey (a retry with the same
	// IdemKey does not add again). Its output, if HasN, is N: the counter's
	// value right after the increment was applied.
	Incr
	// Count reads a counter; its output is N.
	Count
)

// String returns "put", "get", "incr" or "count".
func (k OpKind) String() string {
	switch k {
	case Put:
		return "put"
	case Get:
		return "get"
	case Incr:
		return "incr"
	case Count:
		return "count"
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

func (k OpKind) counter() bool { return k == Incr || k == Count }

// OpID identifies a client operation within a History.
type OpID uint64

// Op is one client operation on one key, for the linearizability check and
// the counter check. A key's operations are all register operations (Put,
// Get) or all counter operations (Incr, Count).
type Op struct {
	ID OpID
	// Client names the caller; operations of one client do not overlap.
	Client string
	Key    string
	Kind   OpKind
	// Invoke and Return: when the client called and when it learned the
	// outcome. Return is ignored, taken as Never, when the outcome is
	// Unknown.
	Invoke time.Duration
	Return time.Duration
	// Outcome: Accepted when the operation returned, Rejected when it
	// definitely did not take effect, Unknown otherwise. A Rejected
	// operation is left out of the check; an Unknown Get or Count too; an
	// Unknown Put or Incr may have taken effect at any time after Invoke.
	Outcome Outcome
	// Value: the value put (Put) or read (Get).
	Value string
	// Delta and IdemKey: the increment and its idempotency key (Incr). An
	// empty IdemKey makes every Incr distinct.
	Delta   int64
	IdemKey string
	// N: the counter read (Count) or the value after the increment (Incr,
	// when HasN).
	N    int64
	HasN bool
}

func (o Op) String() string {
	var what string
	switch o.Kind {
	case Put:
		what = fmt.Sprintf("put(%q)", o.Value)
	case Get:
		what = fmt.Sprintf("get() -> %q", o.Value)
	case Incr:
		what = fmt.Sprintf("incr(%d, %q)", o.Delta, o.IdemKey)
		if o.HasN {
			what += fmt.Sprintf(" -> %d", o.N)
		}
	case Count:
		what = fmt.Sprintf("count() -> %d", o.N)
	default:
		what = o.Kind.String()
	}
	return fmt.Sprintf("op #%d by %s on %q: %s [%v, %s] %s", o.ID, o.Client, o.Key, what, o.Invoke, fmtReturn(o.Outcome, o.Return), o.Outcome)
}

// History is everything a run recorded. Build one by hand or take one from
// a Recorder. A History is plain data: checkers only read it, so one
// History may be checked from many goroutines at once, as long as nobody
// modifies it meanwhile.
type History struct {
	Tenures []Tenure
	// Store is the store's log in the store's order.
	Store  []StoreEvent
	Writes []Write
	Ops    []Op
	// Initial is each key's value before the run ("" or counter 0 if
	// absent); Final the store's value of each key after the run. Counters
	// are decimal integers.
	Initial map[string]string
	Final   map[string]string
}

func fmtReturn(o Outcome, d time.Duration) string {
	if o == Unknown {
		return "never"
	}
	return fmtTime(d)
}

func fmtTime(d time.Duration) string {
	if d == Never {
		return "never"
	}
	return d.String()
}

// Validate reports the first fact that makes h unusable, as an error
// wrapping ErrInvalidHistory. A nil History is valid and empty.
func (h *History) Validate() error {
	if h == nil {
		return nil
	}
	for i, t := range h.Tenures {
		if t.Scope == "" {
			return fmt.Errorf("%w: tenure %d has no scope", ErrInvalidHistory, i)
		}
		if t.End < t.Start {
			return fmt.Errorf("%w: tenure %d (%v) ends before it begins", ErrInvalidHistory, i, t)
		}
	}
	ids := make(map[WriteID]struct{}, len(h.Writes))
	for i, w := range h.Writes {
		if w.ID == 0 {
			return fmt.Errorf("%w: write %d has no ID", ErrInvalidHistory, i)
		}
		if _, dup := ids[w.ID]; dup {
			return fmt.Errorf("%w: write ID %d appears twice", ErrInvalidHistory, w.ID)
		}
		ids[w.ID] = struct{}{}
		if w.Scope == "" {
			return fmt.Errorf("%w: %v has no scope", ErrInvalidHistory, w)
		}
		if w.Outcome != Unknown && w.Return < w.Invoke {
			return fmt.Errorf("%w: %v returns before it is invoked", ErrInvalidHistory, w)
		}
		if w.Outcome > Rejected {
			return fmt.Errorf("%w: %v has an unknown outcome", ErrInvalidHistory, w)
		}
	}
	for i, e := range h.Store {
		switch e.Kind {
		case FloorRaised:
			if e.Scope == "" {
				return fmt.Errorf("%w: store event %d raises the floor of no scope", ErrInvalidHistory, i)
			}
		case WriteApplied:
			if _, ok := ids[e.Write]; !ok {
				return fmt.Errorf("%w: store event %d applies write #%d, which the history does not hold", ErrInvalidHistory, i, e.Write)
			}
		default:
			return fmt.Errorf("%w: store event %d has kind %v", ErrInvalidHistory, i, e.Kind)
		}
	}
	kinds := make(map[string]OpKind)
	for _, o := range h.Ops {
		if o.Kind < Put || o.Kind > Count {
			return fmt.Errorf("%w: %v has an unknown kind", ErrInvalidHistory, o)
		}
		if o.Outcome != Unknown && o.Return < o.Invoke {
			return fmt.Errorf("%w: %v returns before it is invoked", ErrInvalidHistory, o)
		}
		if o.Outcome > Rejected {
			return fmt.Errorf("%w: %v has an unknown outcome", ErrInvalidHistory, o)
		}
		if k, ok := kinds[o.Key]; ok && k.counter() != o.Kind.counter() {
			return fmt.Errorf("%w: key %q has both %v and %v operations", ErrInvalidHistory, o.Key, k, o.Kind)
		}
		kinds[o.Key] = o.Kind
	}
	return nil
}
