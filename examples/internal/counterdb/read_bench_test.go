package counterdb

import (
	"context"
	"fmt"
	"testing"

	"github.com/tenure-go/tenure/ownership/ring"
)

// BenchmarkReadPartition reads one partition of 32 (4,000 counters) as a
// load or a preparation does, on SQLite, with the counters' index and,
// side by side, with an index of (slot, seq) alone, whose reads look up
// each row's key and value in the table.
func BenchmarkReadPartition(b *testing.B) {
	const partitions, perPartition = 32, 4000
	for _, idx := range []struct{ name, columns string }{
		{"index=covering", countersIndexColumns},
		{"index=slot,seq", "(slot, seq)"},
	} {
		b.Run(idx.name, func(b *testing.B) {
			s, _ := newTestStore(b)
			ctx := context.Background()
			if _, err := s.db.ExecContext(ctx, "DROP INDEX "+countersIndex); err != nil {
				b.Fatal(err)
			}
			if _, err := s.db.ExecContext(ctx, "CREATE INDEX "+countersIndex+" ON "+CountersTable+" "+idx.columns); err != nil {
				b.Fatal(err)
			}
			tx, err := s.db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			for j := range partitions * perPartition {
				k := fmt.Sprintf("seed-%d", j)
				if _, err := tx.ExecContext(ctx, "INSERT INTO "+CountersTable+" (key, partition, slot, value, epoch, seq) VALUES (?, ?, ?, 1, 0, ?)",
					k, ring.PartitionOf(k, partitions), SlotOf(k), j); err != nil {
					b.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			rows := 0
			for i := 0; b.Loop(); i++ {
				v, _, err := s.read(ctx, i%partitions, partitions, -1)
				if err != nil {
					b.Fatal(err)
				}
				rows += len(v)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rows), "ns/row")
		})
	}
}
