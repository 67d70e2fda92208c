package check_test

import (
	"testing"

	"github.com/tenure-go/tenure/sim/check"
)

// BenchmarkLinearizable10kOps64Keys checks a linearizable history of
// 10,000 client operations over 64 keys (half registers, half counters,
// 4 overlapping clients per key, a few of unknown outcome).
func BenchmarkLinearizable10kOps64Keys(b *testing.B) {
	h := concurrent(1, 10_000, 64, 4)
	b.ReportAllocs()
	for b.Loop() {
		res, err := check.Linearizable(h, check.LinearConfig{})
		if err != nil || !res.OK() {
			b.Fatalf("%v %+v", err, res)
		}
	}
	b.ReportMetric(float64(len(h.Ops)), "ops/history")
}

// BenchmarkAll10kOps64Keys runs every checker on the same operations plus
// a sequential history of tenures and writes, as a run's report would.
func BenchmarkAll10kOps64Keys(b *testing.B) {
	h := concurrent(1, 10_000, 64, 4)
	s, _ := sequential(1, 10_000)
	h.Tenures, h.Writes, h.Store = s.Tenures, s.Writes, s.Store
	b.ReportAllocs()
	for b.Loop() {
		if _, err := check.All(h, check.Config{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecorderWrite(b *testing.B) {
	var rec check.Recorder
	w := check.Write{Key: "k", Scope: "p/0", Epoch: 1, Writer: "a"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := rec.InvokeWrite(w)
			rec.Applied(id, 1)
			rec.ReturnWrite(id, check.Accepted, 2)
		}
	})
}
