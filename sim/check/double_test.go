package check_test

import (
	"slices"
	"testing"

	"github.com/tenure-go/tenure/sim/check"
)

func TestDoubleExecutions(t *testing.T) {
	tests := []struct {
		name        string
		h           *check.History
		sameEpoch   []string // writers of the one same-epoch violation
		interleaved [2]check.WriteID
	}{
		{name: "nil", h: nil},
		{name: "lost update interleaving, tenures overlap, unfenced", h: lostUpdate(false, 100), interleaved: [2]check.WriteID{1, 2}},
		{name: "lost update interleaving, fenced", h: lostUpdate(true, 100)},
		{name: "old tenure ended before the new one: stale, not double", h: lostUpdate(false, 30)},
		{
			name: "two holders write under one epoch",
			h: &check.History{Writes: []check.Write{
				wr(1, "A", 3, 0, 10, check.Accepted, "-", "a"),
				wr(2, "B", 3, 20, 30, check.Accepted, "-", "b"),
				wr(3, "A", 3, 40, 50, check.Accepted, "-", "c"),
			}},
			sameEpoch: []string{"A", "B"},
		},
		{
			name: "a rejected write of the second holder does not count",
			h: &check.History{Writes: []check.Write{
				wr(1, "A", 3, 0, 10, check.Accepted, "-", "a"),
				wr(2, "B", 3, 20, 30, check.Rejected, "-", "b"),
			}},
		},
		{
			name: "overlapping tenures, the old holder's late write applied before the new holder's first",
			h: &check.History{
				Tenures: []check.Tenure{tenure("A", 1, 0, 100), tenure("B", 2, 40, -1)},
				Writes: []check.Write{
					wr(1, "A", 1, 30, 60, check.Accepted, "-", "a"),
					wr(2, "B", 2, 50, 70, check.Accepted, "-", "b"),
				},
				Store: []check.StoreEvent{apply(1, 45), floor(2, 48), apply(2, 55)},
			},
		},
		{
			name: "the same holder's successive tenures may overlap in the record",
			h: &check.History{
				Tenures: []check.Tenure{tenure("A", 1, 0, 100), tenure("A", 2, 40, -1)},
				Writes: []check.Write{
					wr(1, "A", 2, 50, 52, check.Accepted, "-", "a"),
					wr(2, "A", 1, 60, 62, check.Accepted, "-", "b"),
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := check.DoubleExecutions(tt.h)
			mustNoErr(t, err)
			want := 0
			if tt.sameEpoch != nil {
				want++
				if len(res.SameEpoch) != 1 || !slices.Equal(res.SameEpoch[0].Writers, tt.sameEpoch) || len(res.SameEpoch[0].Writes) != len(tt.sameEpoch) {
					t.Errorf("same-epoch violations %v, want writers %v", res.SameEpoch, tt.sameEpoch)
				}
			}
			if tt.interleaved != [2]check.WriteID{} {
				want++
				if len(res.Interleaved) != 1 {
					t.Fatalf("interleaved %v, want one", res.Interleaved)
				}
				v := res.Interleaved[0]
				if v.NewerWrite.ID != tt.interleaved[0] || v.OlderWrite.ID != tt.interleaved[1] || v.Older.Holder != "A" || v.Newer.Holder != "B" {
					t.Errorf("interleaved %v, want writes %v", v, tt.interleaved)
				}
			}
			if res.Count() != want || res.OK() != (want == 0) {
				t.Errorf("count %d (%v %v), want %d", res.Count(), res.SameEpoch, res.Interleaved, want)
			}
		})
	}
}

func TestEpochs(t *testing.T) {
	tests := []struct {
		name    string
		tenures []check.Tenure
		bad     []int64 // epochs of the tenures reported
	}{
		{name: "increasing", tenures: []check.Tenure{tenure("A", 1, 0, 10), tenure("B", 5, 10, 20), tenure("A", 9, 20, -1)}},
		{name: "recorded out of order", tenures: []check.Tenure{tenure("A", 9, 20, -1), tenure("A", 1, 0, 10), tenure("B", 5, 10, 20)}},
		{name: "same tenure twice", tenures: []check.Tenure{tenure("A", 1, 0, 10), tenure("A", 1, 0, 10)}},
		{name: "decrease", tenures: []check.Tenure{tenure("A", 5, 0, 10), tenure("B", 3, 10, -1)}, bad: []int64{3}},
		{name: "below an earlier maximum", tenures: []check.Tenure{tenure("A", 5, 0, 10), tenure("B", 3, 10, 20), tenure("C", 4, 20, -1)}, bad: []int64{3, 4}},
		{name: "equal epoch, two holders", tenures: []check.Tenure{tenure("A", 5, 0, 10), tenure("B", 5, 10, -1)}, bad: []int64{5}},
		{name: "scopes are independent", tenures: []check.Tenure{tenure("A", 5, 0, 10), {Scope: "p/1", Epoch: 1, Holder: "B", Start: ms(20), End: check.Never}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := check.Epochs(&check.History{Tenures: tt.tenures})
			mustNoErr(t, err)
			var got []int64
			for _, v := range res.Violations {
				got = append(got, v.Next.Epoch)
				if v.Prev.Epoch < v.Next.Epoch {
					t.Errorf("violation %v: previous epoch is lower", v)
				}
			}
			if !slices.Equal(got, tt.bad) || res.Tenures != len(tt.tenures) {
				t.Errorf("violations %v, want epochs %v", res.Violations, tt.bad)
			}
		})
	}
}
