// Package loadmeter is a node's load meter: it counts the work admitted
// per partition and smooths it into a rate per partition. ownership's Node
// publishes its rates for the balancer, and sim/placement runs the same
// meter on virtual time.
//
// The rate of a partition is an exponentially weighted moving average of
// the rates measured at each tick, with a time constant (the window), over
// the time the node has served the partition only: the average is divided
// by the weight of the ticks it holds, 1-exp(-served/window), so a
// partition the node starts serving takes its first full tick's rate and
// is not blended up from zero (which would show the node too cool, and
// the node that gave it up too hot, for about a window after every move).
// The tick at which a partition is first served counts only part of an
// interval (the node started serving it somewhere inside), so that tick
// is discarded and the partition's rate is known from the next one.
package loadmeter

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/internal/keys"
)

// Meter counts and smooths the load of every partition. Add and Grow may
// be called by any goroutine; Tick, Rate and Report by one goroutine at a
// time.
type Meter struct {
	counts  atomic.Pointer[[]atomic.Uint64] // units admitted since the last tick, by partition
	grow    sync.Mutex                      // serializes Grow
	rates   []float64                       // smoothed units per second, by partition
	weight  []float64                       // the weight of the ticks in rates: 1-exp(-served/window); 0: none yet
	served  []bool                          // served at the last tick
	serving []bool                          // scratch of Tick: served at this tick
}

// New returns the meter of partitions partitions (at least 0).
func New(partitions int) *Meter {
	m := &Meter{}
	m.Grow(partitions)
	return m
}

// Partitions returns the number of partitions m counts.
func (m *Meter) Partitions() int { return len(*m.counts.Load()) }

// Grow makes m count the partitions below n too (a resize of the partition
// count made them); it never shrinks. Units added while it grows may be
// counted at the next tick but one, or, in a race of a few instructions
// with the copy, not at all.
func (m *Meter) Grow(n int) {
	m.grow.Lock()
	defer m.grow.Unlock()
	old := m.counts.Load()
	if old != nil && n <= len(*old) {
		return
	}
	next := make([]atomic.Uint64, max(n, 0))
	m.counts.Store(&next)
	if old != nil {
		for p := range *old {
			next[p].Add((*old)[p].Swap(0))
		}
	}
}

// Add counts cost units of work on partition p; a partition outside
// [0, Partitions()) is not counted. It is safe for concurrent use and does
// not allocate.
func (m *Meter) Add(p int, cost uint64) {
	if c := *m.counts.Load(); uint(p) < uint(len(c)) {
		c[p].Add(cost)
	}
}

// fit sizes the tick's slices to the counts (Tick's goroutine).
func (m *Meter) fit(counts []atomic.Uint64) {
	if n := len(counts) - len(m.rates); n > 0 {
		m.rates = append(m.rates, make([]float64, n)...)
		m.weight = append(m.weight, make([]float64, n)...)
		m.served = append(m.served, make([]bool, n)...)
		m.serving = append(m.serving, make([]bool, n)...)
	}
}

// Tick folds the counts of the last elapsed time into the rates of the
// partitions in owned, the partitions the node serves now. A partition's
// measured rate enters its average with weight 1-exp(-elapsed/window),
// renormalised over the ticks it holds (see the package doc), so the
// average does not depend on how often it ticks. A partition not in owned
// is reset; one in owned that was not at the last tick has its counts
// discarded (a partial interval) and is averaged from the next tick on.
// Partitions outside [0, Partitions()) in owned are ignored; an elapsed
// or a window that is not positive leaves every rate as it is.
func (m *Meter) Tick(elapsed, window time.Duration, owned []int) {
	if elapsed <= 0 || window <= 0 {
		return
	}
	alpha := 1 - math.Exp(-elapsed.Seconds()/window.Seconds())
	counts := *m.counts.Load()
	m.fit(counts)
	clear(m.serving)
	for _, p := range owned {
		if uint(p) < uint(len(m.serving)) {
			m.serving[p] = true
		}
	}
	for p := range counts {
		count := counts[p].Swap(0)
		switch {
		case !m.serving[p]:
			m.rates[p], m.weight[p], m.served[p] = 0, 0, false
		case !m.served[p]:
			m.served[p] = true // the first tick: served for part of elapsed only
		default:
			rate := float64(count) / elapsed.Seconds()
			m.weight[p] += alpha * (1 - m.weight[p])
			m.rates[p] += alpha / m.weight[p] * (rate - m.rates[p])
		}
	}
}

// Rate returns partition p's smoothed rate in units per second: 0 for a
// partition outside [0, Partitions()), not served or not measured yet.
func (m *Meter) Rate(p int) float64 {
	if uint(p) >= uint(len(m.rates)) {
		return 0
	}
	return m.rates[p]
}

// Report returns the report of the partitions in owned, rates rounded to
// three significant digits (Round3) so that steady load writes the same
// report; partitions of rate 0 after rounding are left out.
func (m *Meter) Report(window time.Duration, owned []int) keys.LoadReport {
	r := keys.LoadReport{Window: window.Seconds(), Partitions: []int{}, Loads: []float64{}}
	for _, p := range owned {
		if l := Round3(m.Rate(p)); l > 0 {
			r.Partitions = append(r.Partitions, p)
			r.Loads = append(r.Loads, l)
		}
	}
	return r
}

// Round3 rounds x to three significant digits; it returns 0 for x not a
// finite positive number, and for x so small that it has no such form.
func Round3(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 1) {
		return 0
	}
	scale := math.Pow(10, 2-math.Floor(math.Log10(x)))
	if r := math.Round(x*scale) / scale; r > 0 && !math.IsInf(r, 1) {
		return r
	}
	return 0 // below about 1e-305, where scale overflows
}
