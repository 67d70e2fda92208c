package keys

import (
	"encoding/json"
	"fmt"
	"math"
)

// LoadReport is the value of a load report key: a node's smoothed load,
// in units of work per second, of each partition it serves, in a compact
// form (two parallel arrays).
type LoadReport struct {
	// Window is the smoothing window in seconds.
	Window float64 `json:"w"`
	// Partitions and Loads are parallel: Loads[i] is the load of
	// Partitions[i]. Partitions with no load are left out.
	Partitions []int     `json:"p"`
	Loads      []float64 `json:"l"`
}

// EncodeLoadReport returns the JSON value of r.
func EncodeLoadReport(r LoadReport) string {
	b, _ := json.Marshal(r) // cannot fail: numbers only (the loads are finite)
	return string(b)
}

// DecodeLoadReport parses a load report. It fails for a value that is not
// one, whose arrays differ in length, or that holds a negative partition or
// a load that is negative or not finite.
func DecodeLoadReport(v []byte) (LoadReport, error) {
	var r LoadReport
	if err := json.Unmarshal(v, &r); err != nil {
		return LoadReport{}, err
	}
	if len(r.Partitions) != len(r.Loads) {
		return LoadReport{}, fmt.Errorf("load report: %d partitions, %d loads", len(r.Partitions), len(r.Loads))
	}
	for i, p := range r.Partitions {
		if l := r.Loads[i]; p < 0 || l < 0 || math.IsNaN(l) || math.IsInf(l, 0) {
			return LoadReport{}, fmt.Errorf("load report: partition %d, load %v", p, l)
		}
	}
	return r, nil
}
