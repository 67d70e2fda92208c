package check_test

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tenure-go/tenure/sim/check"
)

func checkSequential(t *testing.T, seed uint64, steps int) {
	t.Helper()
	h, maxGap := sequential(seed, steps)
	end := h.Tenures[len(h.Tenures)-1].Start + 1
	for _, o := range h.Ops {
		end = max(end, o.Return)
	}
	r, err := check.All(h, check.Config{Liveness: &check.LivenessSpec{
		From: h.Tenures[0].Start, Until: end, HealedAt: 0, Bound: maxGap,
	}})
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if !r.OK() {
		t.Fatalf("seed %d: a valid sequential history failed:\n%s", seed, strings.Join(r.Violations(), "\n"))
	}
	if s := r.Summary(); s.Linearizable != "yes" || s.Operations != len(h.Writes)+len(h.Ops) {
		t.Fatalf("seed %d: summary %v", seed, s)
	}
}

// TestRandomSequentialHistoriesPass: every checker accepts what a correct
// system that does one thing at a time produces.
func TestRandomSequentialHistoriesPass(t *testing.T) {
	for seed := range uint64(300) {
		checkSequential(t, seed, 50+int(seed))
	}
}

// TestRandomHistoriesWithAStaleWriteFail: the same histories with one
// rejected stale write turned into an accepted one fail StaleWrites.
func TestRandomHistoriesWithAStaleWriteFail(t *testing.T) {
	mutated := 0
	for seed := range uint64(100) {
		h, _ := sequential(seed, 200)
		i := slices.IndexFunc(h.Writes, func(w check.Write) bool { return w.Outcome == check.Rejected })
		if i < 0 {
			continue
		}
		h.Writes[i].Outcome = check.Accepted
		res, err := check.StaleWrites(h)
		if err != nil || len(res.Violations) != 1 || res.Violations[0].Write.ID != h.Writes[i].ID {
			t.Fatalf("seed %d: %v %v, want write #%d stale", seed, err, res.Violations, h.Writes[i].ID)
		}
		mutated++
	}
	if mutated < 50 {
		t.Fatalf("only %d histories had a stale write to accept", mutated)
	}
}

func FuzzSequentialHistories(f *testing.F) {
	for _, s := range []uint64{0, 1, 42, 1 << 40} {
		f.Add(s, uint16(200))
	}
	f.Fuzz(func(t *testing.T, seed uint64, steps uint16) {
		checkSequential(t, seed, 1+int(steps)%2000)
	})
}

// TestRandomConcurrentHistoriesLinearizable: histories of a linearizable
// store with overlapping clients pass porcupine.
func TestRandomConcurrentHistoriesLinearizable(t *testing.T) {
	for seed := range uint64(20) {
		h := concurrent(seed, 2000, 8, 3)
		res, err := check.Linearizable(h, check.LinearConfig{})
		if err != nil || !res.OK() || res.Ops == 0 {
			t.Fatalf("seed %d: %v %+v", seed, err, res)
		}
	}
}

// TestRecorderConcurrent records from many goroutines under -race.
func TestRecorderConcurrent(t *testing.T) {
	var rec check.Recorder
	var wg sync.WaitGroup
	const g, n = 8, 200
	for i := range g {
		wg.Go(func() {
			holder := string(rune('a' + i))
			scope := "p/" + holder
			rec.BeginTenure(scope, 1, holder, ms(0))
			for j := range n {
				id := rec.InvokeWrite(check.Write{Key: scope, Scope: scope, Epoch: 1, Writer: holder, Invoke: ms(j)})
				rec.Applied(id, ms(j))
				rec.ReturnWrite(id, check.Accepted, ms(j))
				op := rec.InvokeOp(check.Op{Client: holder, Key: scope, Kind: check.Put, Invoke: ms(j)})
				rec.ReturnOp(op, check.Result{Outcome: check.Accepted, At: ms(j)})
				_ = rec.History()
			}
			rec.EndTenure(scope, 1, holder, ms(n))
			rec.SetFinal(scope, "")
		})
	}
	wg.Wait()
	h := rec.History()
	if len(h.Writes) != g*n || len(h.Ops) != g*n || len(h.Store) != g*n || len(h.Tenures) != g || len(h.Final) != g {
		t.Fatalf("recorded %d writes, %d ops, %d store events, %d tenures", len(h.Writes), len(h.Ops), len(h.Store), len(h.Tenures))
	}
	for _, tn := range h.Tenures {
		if tn.End != ms(n) {
			t.Errorf("tenure %v not ended", tn)
		}
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestRecorderEdges(t *testing.T) {
	var rec check.Recorder
	rec.EndTenure("p/0", 3, "a", ms(5))        // end without begin
	rec.ReturnWrite(99, check.Accepted, ms(1)) // unknown IDs are ignored
	rec.Applied(0, ms(1))                      //
	rec.ReturnOp(7, check.Result{})            //
	id := rec.InvokeWrite(check.Write{ID: 42, Scope: "p/0", Invoke: ms(10), Outcome: check.Accepted})
	rec.ReturnWrite(id, check.Accepted, ms(3)) // return before invoke is clamped
	rec.SetInitial("k", "0")
	h := rec.History()
	if len(h.Tenures) != 1 || h.Tenures[0].Start != ms(5) || h.Tenures[0].End != ms(5) {
		t.Errorf("tenures %v", h.Tenures)
	}
	if w := h.Writes[0]; w.ID != 1 || w.Return != ms(10) {
		t.Errorf("write %v", w)
	}
	if h.Initial["k"] != "0" || len(h.Store) != 0 {
		t.Errorf("history %+v", h)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestSequentialGeneratorCoverage guards the property test against a
// generator that stopped producing the cases it exists for.
func TestSequentialGeneratorCoverage(t *testing.T) {
	h, _ := sequential(3, 2000)
	var unknownWrites, unknownOps, rejected, tenures int
	for _, w := range h.Writes {
		switch w.Outcome {
		case check.Unknown:
			unknownWrites++
		case check.Rejected:
			rejected++
		}
	}
	for _, o := range h.Ops {
		if o.Outcome == check.Unknown {
			unknownOps++
		}
	}
	tenures = len(h.Tenures)
	if unknownWrites == 0 || unknownOps == 0 || rejected == 0 || tenures < 10 {
		t.Fatalf("generator: %d unknown writes, %d unknown ops, %d rejected, %d tenures", unknownWrites, unknownOps, rejected, tenures)
	}
}
