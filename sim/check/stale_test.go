package check_test

import (
	"errors"
	"testing"

	"github.com/tenure-go/tenure/sim/check"
)

// lostUpdate is the classic interleaving: A reads, pauses past its lease,
// B takes over, reads and writes, then A wakes and writes what it computed
// from its old read. fenced says whether the store refused A's write.
func lostUpdate(fenced bool, aEnd int) *check.History {
	aOutcome := check.Accepted
	if fenced {
		aOutcome = check.Rejected
	}
	h := &check.History{
		Tenures: []check.Tenure{tenure("A", 1, 0, aEnd), tenure("B", 2, 40, -1)},
		Writes: []check.Write{
			wr(1, "B", 2, 50, 52, check.Accepted, "0", "1"),
			wr(2, "A", 1, 60, 62, aOutcome, "0", "1"),
		},
		Initial: map[string]string{"k": "0"},
		Final:   map[string]string{"k": "1"},
	}
	if fenced {
		h.Store = []check.StoreEvent{floor(2, 41), apply(1, 51)}
	}
	return h
}

func TestStaleWrites(t *testing.T) {
	tests := []struct {
		name  string
		h     *check.History
		stale []check.WriteID // writes reported stale
		floor int64
	}{
		{name: "nil history", h: nil},
		{name: "empty", h: &check.History{}},
		{name: "lost update interleaving, unfenced", h: lostUpdate(false, 100), stale: []check.WriteID{2}, floor: 2},
		{name: "lost update interleaving, fenced", h: lostUpdate(true, 100)},
		{
			name: "successive holders, in order",
			h: &check.History{Writes: []check.Write{
				wr(1, "A", 1, 0, 10, check.Accepted, "-", "a"),
				wr(2, "B", 2, 20, 30, check.Accepted, "-", "b"),
				wr(3, "B", 2, 40, 50, check.Accepted, "-", "c"),
			}},
		},
		{
			name: "old epoch after a floor raise",
			h: &check.History{
				Store:  []check.StoreEvent{floor(5, 10)},
				Writes: []check.Write{wr(1, "A", 4, 20, 30, check.Accepted, "-", "a")},
			},
			stale: []check.WriteID{1}, floor: 5,
		},
		{
			name: "old epoch concurrent with a floor raise: order unknown, not reported",
			h: &check.History{
				Store:  []check.StoreEvent{floor(5, 25)},
				Writes: []check.Write{wr(1, "A", 4, 20, 30, check.Accepted, "-", "a")},
			},
		},
		{
			name: "overlapping writes of two epochs, no store log: not reported",
			h: &check.History{Writes: []check.Write{
				wr(1, "B", 2, 10, 30, check.Accepted, "-", "b"),
				wr(2, "A", 1, 20, 40, check.Accepted, "-", "a"),
			}},
		},
		{
			name: "the store log orders writes at one virtual instant",
			h: &check.History{
				Writes: []check.Write{
					wr(1, "B", 2, 10, 10, check.Accepted, "-", "b"),
					wr(2, "A", 1, 10, 10, check.Accepted, "-", "a"),
				},
				Store: []check.StoreEvent{apply(1, 10), apply(2, 10)},
			},
			stale: []check.WriteID{2}, floor: 2,
		},
		{
			name: "the store log says the old write came first",
			h: &check.History{
				Writes: []check.Write{
					wr(1, "B", 2, 10, 10, check.Accepted, "-", "b"),
					wr(2, "A", 1, 10, 10, check.Accepted, "-", "a"),
				},
				Store: []check.StoreEvent{apply(2, 10), apply(1, 10)},
			},
		},
		{
			name: "unknown outcome applied per the store log counts",
			h: &check.History{
				Store: []check.StoreEvent{floor(3, 5), apply(1, 20)},
				Writes: []check.Write{
					wr(1, "A", 2, 10, 0, check.Unknown, "-", "a"),
				},
			},
			stale: []check.WriteID{1}, floor: 3,
		},
		{
			name: "unknown outcome not in the log is not counted",
			h: &check.History{
				Store:  []check.StoreEvent{floor(3, 5)},
				Writes: []check.Write{wr(1, "A", 2, 10, 0, check.Unknown, "-", "a")},
			},
		},
		{
			// A writer outside the fleet (an operator's etcdctl) raised the
			// floor above every tenure's epoch, the live owner's included:
			// no tenure or write holds epoch 90, and the owner's write
			// after it in the store's log is stale all the same.
			name: "a floor raised outside the fleet, above the live owner's epoch",
			h: &check.History{
				Tenures: []check.Tenure{tenure("A", 7, 0, -1)},
				Store:   []check.StoreEvent{floor(7, 1), apply(1, 10), floor(90, 20), apply(2, 20)},
				Writes: []check.Write{
					wr(1, "A", 7, 5, 11, check.Accepted, "-", "a"),
					wr(2, "A", 7, 15, 21, check.Accepted, "-", "b"),
				},
			},
			stale: []check.WriteID{2}, floor: 90,
		},
		{
			name: "other scopes do not fence",
			h: &check.History{
				Store:  []check.StoreEvent{{Kind: check.FloorRaised, Scope: "p/1", Epoch: 9, At: ms(1)}},
				Writes: []check.Write{wr(1, "A", 2, 10, 20, check.Accepted, "-", "a")},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := check.StaleWrites(tt.h)
			mustNoErr(t, err)
			if len(res.Violations) != len(tt.stale) {
				t.Fatalf("violations %v, want writes %v", res.Violations, tt.stale)
			}
			for i, v := range res.Violations {
				if v.Write.ID != tt.stale[i] || v.Floor != tt.floor {
					t.Errorf("violation %v: want write #%d below floor %d", v, tt.stale[i], tt.floor)
				}
				if v.ByWrite == nil && v.ByEvent == nil {
					t.Errorf("violation %v says nothing of what set the floor", v)
				}
			}
			if res.OK() != (len(tt.stale) == 0) {
				t.Errorf("OK() = %v", res.OK())
			}
		})
	}
}

func TestInvalidHistory(t *testing.T) {
	bad := []*check.History{
		{Tenures: []check.Tenure{{Scope: "p/0", Start: ms(10), End: ms(5)}}},
		{Tenures: []check.Tenure{{Start: 0, End: 1}}},
		{Writes: []check.Write{{Scope: "p/0"}}},
		{Writes: []check.Write{{ID: 1, Scope: "p/0"}, {ID: 1, Scope: "p/0"}}},
		{Writes: []check.Write{{ID: 1, Scope: "p/0", Invoke: ms(5), Return: ms(1), Outcome: check.Accepted}}},
		{Writes: []check.Write{{ID: 1}}},
		{Store: []check.StoreEvent{apply(7, 1)}},
		{Store: []check.StoreEvent{{Kind: 9}}},
		{Store: []check.StoreEvent{{Kind: check.FloorRaised, Epoch: 1}}},
		{Ops: []check.Op{{Kind: 0}}},
		{Ops: []check.Op{{Kind: check.Get, Invoke: 2, Return: 1, Outcome: check.Accepted}}},
		{Ops: []check.Op{{Kind: check.Put, Key: "x"}, {Kind: check.Incr, Key: "x"}}},
		{Ops: []check.Op{{Kind: check.Put, Outcome: 7}}},
	}
	for i, h := range bad {
		if _, err := check.All(h, check.Config{}); !errors.Is(err, check.ErrInvalidHistory) {
			t.Errorf("history %d: err %v, want ErrInvalidHistory", i, err)
		}
		if _, err := check.StaleWrites(h); !errors.Is(err, check.ErrInvalidHistory) {
			t.Errorf("history %d: StaleWrites err %v", i, err)
		}
	}
	h := &check.History{Ops: []check.Op{{Kind: check.Incr, Key: "c", Outcome: check.Accepted, Delta: 1}}, Final: map[string]string{"c": "x"}}
	if _, err := check.LostUpdates(h); !errors.Is(err, check.ErrInvalidHistory) {
		t.Errorf("unreadable counter: err %v", err)
	}
}

func TestUnknownOutcomeIgnoresReturn(t *testing.T) {
	h := &check.History{
		Writes: []check.Write{{ID: 1, Scope: "p/0", Invoke: ms(5), Return: ms(1)}},
		Ops:    []check.Op{{Kind: check.Put, Key: "x", Invoke: ms(5), Return: ms(1)}},
	}
	if r, err := check.All(h, check.Config{}); err != nil || !r.OK() {
		t.Fatalf("%v %v", r, err)
	}
}

// TestStaleWritesByKey: a key whose partition split moves from the
// parent's scope to a child's; the parent's holder, paused, writes after
// the child's owner did. No floor of the parent's scope says so (its
// retirement failed), but the child's epoch is above the parent's: stale
// by key, not by scope. A write of the child after the parent's is not.
func TestStaleWritesByKey(t *testing.T) {
	child := wr(2, "B", 20, 30, 32, check.Accepted, "0", "1")
	child.Scope = "p/16"
	h := &check.History{
		Writes: []check.Write{
			wr(1, "A", 10, 0, 2, check.Accepted, "-", "0"),
			child,
			wr(3, "A", 10, 40, 42, check.Accepted, "0", "1"),
		},
		Store: []check.StoreEvent{apply(1, 1), apply(2, 31), apply(3, 41)},
	}
	r, err := check.StaleWrites(h)
	mustNoErr(t, err)
	if !r.OK() {
		t.Fatalf("by scope: %v, want none", r.Violations)
	}
	r, err = check.StaleWritesByKey(h)
	mustNoErr(t, err)
	if len(r.Violations) != 1 || r.Violations[0].Write.ID != 3 || r.Violations[0].Floor != 20 {
		t.Fatalf("by key: %v, want write 3 below 20", r.Violations)
	}
	// The parent's floor raised to the split's revision (15) before the
	// child served: reported once, with the child's higher floor.
	h.Store = []check.StoreEvent{apply(1, 1), {Kind: check.FloorRaised, Scope: "p/0", Epoch: 15, At: ms(20)}, apply(2, 31), apply(3, 41)}
	r, err = check.StaleWritesByKey(h)
	mustNoErr(t, err)
	if len(r.Violations) != 1 || r.Violations[0].Floor != 20 {
		t.Fatalf("by key with the parent's floor: %v, want write 3 below 20 once", r.Violations)
	}
	// In order: the parent's writes, then the child's.
	h.Writes[2].Invoke, h.Writes[2].Return = ms(10), ms(12)
	h.Store = []check.StoreEvent{apply(1, 1), apply(3, 11), apply(2, 31)}
	r, err = check.StaleWritesByKey(h)
	mustNoErr(t, err)
	if !r.OK() {
		t.Fatalf("in order: %v, want none", r.Violations)
	}
}
