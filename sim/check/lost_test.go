package check_test

import (
	"slices"
	"testing"

	"github.com/tenure-go/tenure/sim/check"
)

func incr(client, idem string, inv, ret int, o check.Outcome) check.Op {
	op := check.Op{Client: client, Key: "c", Kind: check.Incr, Delta: 1, IdemKey: idem, Invoke: ms(inv), Return: ms(ret), Outcome: o}
	if o == check.Unknown {
		op.Return = check.Never
	}
	return op
}

func TestLostUpdates(t *testing.T) {
	chain := func(final string, ws ...check.Write) *check.History {
		return &check.History{Writes: ws, Initial: map[string]string{"k": "0"}, Final: map[string]string{"k": final}}
	}
	counter := func(final string, ops ...check.Op) *check.History {
		return &check.History{Ops: ops, Final: map[string]string{"c": final}}
	}
	tests := []struct {
		name  string
		h     *check.History
		kinds []check.LostKind
		lost  int64
	}{
		{name: "nil", h: nil},
		{name: "lost update interleaving, unfenced", h: lostUpdate(false, 100), kinds: []check.LostKind{check.Forked}, lost: 1},
		{name: "lost update interleaving, fenced", h: lostUpdate(true, 100)},
		{
			name: "a clean chain",
			h: chain("3",
				wr(1, "A", 1, 0, 1, check.Accepted, "0", "1"),
				wr(2, "A", 1, 2, 3, check.Accepted, "1", "2"),
				wr(3, "B", 2, 4, 5, check.Accepted, "2", "3")),
		},
		{
			name: "a chain with an unknown write that landed",
			h: chain("3",
				wr(1, "A", 1, 0, 1, check.Accepted, "0", "1"),
				wr(2, "A", 1, 2, 3, check.Unknown, "1", "2"),
				wr(3, "B", 2, 4, 5, check.Accepted, "2", "3")),
		},
		{
			name: "a chain with an unknown write that did not land",
			h: chain("2",
				wr(1, "A", 1, 0, 1, check.Accepted, "0", "1"),
				wr(2, "A", 1, 2, 3, check.Accepted, "1", "2"),
				wr(3, "A", 1, 4, 5, check.Unknown, "2", "3")),
		},
		{
			name: "the last acknowledged write is missing from the final state",
			h: chain("1",
				wr(1, "A", 1, 0, 1, check.Accepted, "0", "1"),
				wr(2, "A", 1, 2, 3, check.Accepted, "1", "2")),
			kinds: []check.LostKind{check.FinalMismatch}, lost: 1,
		},
		{
			name: "an acknowledged write overwritten without being read",
			h: chain("2",
				wr(1, "A", 1, 0, 1, check.Accepted, "0", "1"),
				wr(2, "B", 2, 2, 3, check.Accepted, "1", "2"),
				wr(3, "A", 1, 4, 5, check.Accepted, "7", "8")),
			kinds: []check.LostKind{check.Overwritten}, lost: 1,
		},
		{
			name: "blind writes: the final value is the last write",
			h: &check.History{Writes: []check.Write{
				wr(1, "A", 1, 0, 1, check.Accepted, "-", "x"),
				wr(2, "A", 1, 2, 3, check.Accepted, "-", "y"),
			}, Final: map[string]string{"k": "y"}},
		},
		{
			name: "blind writes: concurrent last writes, either may win",
			h: &check.History{Writes: []check.Write{
				wr(1, "A", 1, 0, 10, check.Accepted, "-", "x"),
				wr(2, "B", 1, 2, 12, check.Accepted, "-", "y"),
			}, Final: map[string]string{"k": "x"}},
		},
		{
			name: "blind writes: the final value is an overwritten one",
			h: &check.History{Writes: []check.Write{
				wr(1, "A", 1, 0, 1, check.Accepted, "-", "x"),
				wr(2, "A", 1, 2, 3, check.Accepted, "-", "y"),
			}, Final: map[string]string{"k": "x"}},
			kinds: []check.LostKind{check.FinalMismatch}, lost: 1,
		},
		{
			name: "counter: every acknowledged increment once, a retry deduplicated",
			h: counter("3",
				incr("a", "i1", 0, 1, check.Accepted),
				incr("a", "i2", 2, 3, check.Unknown),
				incr("a", "i2", 4, 5, check.Accepted),
				incr("b", "i3", 0, 5, check.Accepted),
				incr("b", "i4", 6, 7, check.Rejected)),
		},
		{
			name: "counter: an unknown increment may have landed",
			h:    counter("2", incr("a", "i1", 0, 1, check.Accepted), incr("a", "i2", 2, 0, check.Unknown)),
		},
		{
			name:  "counter: an acknowledged increment lost",
			h:     counter("1", incr("a", "i1", 0, 1, check.Accepted), incr("b", "i2", 0, 1, check.Accepted)),
			kinds: []check.LostKind{check.CounterShort}, lost: 1,
		},
		{
			name:  "counter: an increment applied twice",
			h:     counter("3", incr("a", "i1", 0, 1, check.Accepted), incr("a", "i1", 2, 3, check.Accepted), incr("b", "i2", 0, 1, check.Accepted)),
			kinds: []check.LostKind{check.CounterOver}, lost: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := check.LostUpdates(tt.h)
			mustNoErr(t, err)
			var kinds []check.LostKind
			for _, v := range res.Violations {
				kinds = append(kinds, v.Kind)
				if v.Key == "" || v.String() == "" {
					t.Errorf("violation %+v lacks detail", v)
				}
			}
			if !slices.Equal(kinds, tt.kinds) || res.Lost() != tt.lost || res.OK() != (len(tt.kinds) == 0) {
				t.Errorf("violations %v (lost %d), want kinds %v (lost %d)", res.Violations, res.Lost(), tt.kinds, tt.lost)
			}
		})
	}
}

func TestLostUpdateForkDetail(t *testing.T) {
	res, err := check.LostUpdates(lostUpdate(false, 100))
	mustNoErr(t, err)
	v := res.Violations[0]
	if v.Read != "0" || len(v.Writes) != 2 || v.Writes[0].Writer != "B" || v.Writes[1].Writer != "A" {
		t.Errorf("fork %v: want both writers and the value they read", v)
	}
}
