package keys

import (
	"encoding/json"
	"time"
)

// Migration returns the key of the ring-algorithm migration that runs:
// while it exists, the balancer writes no move and the migration's
// placements (OriginMigration) move partitions to their owners under the
// target algorithm.
func (l Layout) Migration() string { return l.prefix + "migration" }

// MigrationRecord is the value of the migration key: the algorithm the
// fleet migrates to (its stored number), the budget of moves per step,
// who started it, why and when (the operator's clock).
type MigrationRecord struct {
	Target int       `json:"target"`
	Budget int       `json:"budget"`
	Actor  string    `json:"actor"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

// DecodeMigration decodes the value of the migration key. A value that
// cannot be decoded is a record whose Reason says so and whose Target is
// 0: the key stands, so the balancer stays paused until it is aborted.
func DecodeMigration(v []byte) MigrationRecord {
	var m MigrationRecord
	if err := json.Unmarshal(v, &m); err != nil {
		return MigrationRecord{Reason: "undecodable migration: " + err.Error()}
	}
	return m
}
