package check

import (
	"fmt"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/cespare/xxhash/v2"
)

// The porcupine models. Each checks one key's operations (the caller
// partitions by key), so a state is one key's value.

// regInput is a register operation; regOutput what it returned.
type regInput struct {
	put   bool
	value string // the value put
}

type regOutput struct {
	known bool   // false: the outcome is unknown, any output goes
	value string // the value a get read
}

// registerModel is the porcupine model of one register: Put(v) sets it,
// Get returns it. The initial state is "" unless the checker was given an
// initial value.
func registerModel(initial string) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return initial },
		Step: func(state, input, output any) (bool, any) {
			in, out := input.(regInput), output.(regOutput)
			if in.put {
				return true, in.value
			}
			s := state.(string)
			return !out.known || out.value == s, s
		},
		Hash: func(state any) uint64 { return xxhash.Sum64String(state.(string)) },
		DescribeOperation: func(input, output any) string {
			in, out := input.(regInput), output.(regOutput)
			if in.put {
				return fmt.Sprintf("put(%q)", in.value)
			}
			if !out.known {
				return "get() -> ?"
			}
			return fmt.Sprintf("get() -> %q", out.value)
		},
		DescribeState: func(state any) string { return fmt.Sprintf("%q", state.(string)) },
	}
}

// ctrInput is a counter operation; ctrOutput what it returned.
type ctrInput struct {
	incr  bool
	delta int64
	idem  int // index of the idempotency key in the key's history, -1 if none
	name  string
}

type ctrOutput struct {
	known bool
	n     int64
}

// ctrState is a counter's value and the set of idempotency keys already
// applied, as a bitset in a string: comparable, so == is Equal, and never
// modified in place.
type ctrState struct {
	n       int64
	applied string
}

func (s ctrState) has(i int) bool {
	return i/8 < len(s.applied) && s.applied[i/8]&(1<<(i%8)) != 0
}

func (s ctrState) with(i int) string {
	b := []byte(s.applied)
	if need := i/8 + 1; len(b) < need {
		b = append(b, make([]byte, need-len(b))...)
	}
	b[i/8] |= 1 << (i % 8)
	return string(b)
}

// counterModel is the porcupine model of one counter with idempotent
// increments: Incr(d, k) adds d once per idempotency key k and returns the
// counter after it (checked only when the client recorded it, and not for
// a retry of a key already applied, whose reply a store may give either as
// the original result or the current value); Count returns the counter.
func counterModel(initial int64) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return ctrState{n: initial} },
		Step: func(state, input, output any) (bool, any) {
			s, in, out := state.(ctrState), input.(ctrInput), output.(ctrOutput)
			if !in.incr {
				return !out.known || out.n == s.n, s
			}
			if in.idem >= 0 && s.has(in.idem) {
				return true, s
			}
			next := ctrState{n: s.n + in.delta, applied: s.applied}
			if in.idem >= 0 {
				next.applied = s.with(in.idem)
			}
			return !out.known || out.n == next.n, next
		},
		Hash: func(state any) uint64 {
			s := state.(ctrState)
			return uint64(s.n)*0x9E3779B97F4A7C15 ^ xxhash.Sum64String(s.applied)
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(ctrInput), output.(ctrOutput)
			var b strings.Builder
			if in.incr {
				fmt.Fprintf(&b, "incr(%d, %q)", in.delta, in.name)
			} else {
				b.WriteString("count()")
			}
			if out.known {
				fmt.Fprintf(&b, " -> %d", out.n)
			} else if !in.incr {
				b.WriteString(" -> ?")
			}
			return b.String()
		},
		DescribeState: func(state any) string { return fmt.Sprint(state.(ctrState).n) },
	}
}
