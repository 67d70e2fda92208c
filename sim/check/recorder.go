package check

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Recorder collects a History from many goroutines. The zero Recorder is
// ready to use; a Recorder is safe for concurrent use and must not be
// copied after first use. Each method appends to a slice under one mutex
// and allocates nothing else in the common case, so recording costs about
// as much as an uncontended lock.
//
// A writer calls InvokeWrite before it sends and ReturnWrite when it learns
// the outcome; the store calls Applied and RaiseFloor as it applies, in its
// own order. A client does the same with InvokeOp and ReturnOp. Facts
// recorded after History is called go into the next History only.
type Recorder struct {
	mu      sync.Mutex
	h       History
	tenures map[tenureKey]int // open tenure -> index in h.Tenures
}

type tenureKey struct {
	scope  string
	epoch  int64
	holder string
}

// BeginTenure records that holder's tenure of scope under epoch began at
// at. The tenure stays open (End Never) until EndTenure.
func (r *Recorder) BeginTenure(scope string, epoch int64, holder string, at time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tenures == nil {
		r.tenures = make(map[tenureKey]int)
	}
	r.tenures[tenureKey{scope, epoch, holder}] = len(r.h.Tenures)
	r.h.Tenures = append(r.h.Tenures, Tenure{Scope: scope, Epoch: epoch, Holder: holder, Start: at, End: Never})
}

// EndTenure records that the tenure begun by BeginTenure with the same
// scope, epoch and holder ended at at. An end without a begin is recorded
// as a tenure that began and ended at at; a second end is ignored.
func (r *Recorder) EndTenure(scope string, epoch int64, holder string, at time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := tenureKey{scope, epoch, holder}
	i, ok := r.tenures[k]
	if !ok {
		r.h.Tenures = append(r.h.Tenures, Tenure{Scope: scope, Epoch: epoch, Holder: holder, Start: at, End: at})
		return
	}
	delete(r.tenures, k)
	if at < r.h.Tenures[i].Start {
		at = r.h.Tenures[i].Start
	}
	r.h.Tenures[i].End = at
}

// RaiseFloor records that the store raised scope's floor to epoch at at.
func (r *Recorder) RaiseFloor(scope string, epoch int64, at time.Duration) {
	r.mu.Lock()
	r.h.Store = append(r.h.Store, StoreEvent{Kind: FloorRaised, Scope: scope, Epoch: epoch, At: at})
	r.mu.Unlock()
}

// InvokeWrite records a write attempt that its writer is about to send and
// returns its ID. w's ID, Return and Outcome are set here (a fresh ID,
// Never, Unknown); the other fields are the caller's.
func (r *Recorder) InvokeWrite(w Write) WriteID {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.ID = WriteID(len(r.h.Writes) + 1)
	w.Return, w.Outcome = Never, Unknown
	r.h.Writes = append(r.h.Writes, w)
	return w.ID
}

// ReturnWrite records the outcome the writer of id learned at at. An
// Unknown outcome leaves the return time at Never. An id this Recorder did
// not hand out is ignored.
func (r *Recorder) ReturnWrite(id WriteID, o Outcome, at time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := byID(r.h.Writes, int(id))
	if w == nil {
		return
	}
	w.Outcome = o
	if o != Unknown {
		w.Return = max(at, w.Invoke)
	}
}

// Applied records that the store applied the write id at at. Call it in
// the store's order of application (from inside the store's critical
// section, for an in-process store). An id this Recorder did not hand out
// is ignored.
func (r *Recorder) Applied(id WriteID, at time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := byID(r.h.Writes, int(id))
	if w == nil {
		return
	}
	r.h.Store = append(r.h.Store, StoreEvent{Kind: WriteApplied, Scope: w.Scope, Epoch: w.Epoch, Write: id, At: at})
}

// InvokeOp records a client operation about to be called and returns its
// ID. op's ID, Return and Outcome are set here (a fresh ID, Never,
// Unknown); its output fields (Value for Get, N for Count and Incr) are
// set by ReturnOp.
func (r *Recorder) InvokeOp(op Op) OpID {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.ID = OpID(len(r.h.Ops) + 1)
	op.Return, op.Outcome = Never, Unknown
	r.h.Ops = append(r.h.Ops, op)
	return op.ID
}

// Result is what a client learned when its operation returned.
type Result struct {
	Outcome Outcome
	// At is when the client learned it.
	At time.Duration
	// Value is the register value a Get read.
	Value string
	// N is the counter a Count read, or the value after an Incr (HasN).
	N    int64
	HasN bool
}

// ReturnOp records what the client of id learned. An Unknown outcome
// leaves the return time at Never. An id this Recorder did not hand out is
// ignored.
func (r *Recorder) ReturnOp(id OpID, res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op := byID(r.h.Ops, int(id))
	if op == nil {
		return
	}
	op.Outcome = res.Outcome
	if res.Outcome == Unknown {
		return
	}
	op.Return = max(res.At, op.Invoke)
	switch op.Kind {
	case Get:
		op.Value = res.Value
	case Count:
		op.N, op.HasN = res.N, true
	case Incr:
		op.N, op.HasN = res.N, res.HasN
	}
}

// SetInitial records key's value before the run.
func (r *Recorder) SetInitial(key, value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.h.Initial == nil {
		r.h.Initial = make(map[string]string)
	}
	r.h.Initial[key] = value
}

// SetFinal records key's value in the store after the run.
func (r *Recorder) SetFinal(key, value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.h.Final == nil {
		r.h.Final = make(map[string]string)
	}
	r.h.Final[key] = value
}

// History returns a copy of everything recorded so far. The copy shares
// nothing with the Recorder, which keeps recording.
func (r *Recorder) History() *History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &History{
		Tenures: slices.Clone(r.h.Tenures),
		Store:   slices.Clone(r.h.Store),
		Writes:  slices.Clone(r.h.Writes),
		Ops:     slices.Clone(r.h.Ops),
		Initial: maps.Clone(r.h.Initial),
		Final:   maps.Clone(r.h.Final),
	}
}

// byID returns the element of s whose ID is id (IDs count from 1 in the
// order recorded), or nil for an ID this Recorder did not hand out.
func byID[T any](s []T, id int) *T {
	if id < 1 || id > len(s) {
		return nil
	}
	return &s[id-1]
}
