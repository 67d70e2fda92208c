package loadmeter

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewPartitionTakesFirstFullTick: a partition the node starts serving
// is not measured at the tick that finds it served (its counts cover part
// of an interval), and takes its first full tick's rate at the next one,
// instead of blending up from zero.
func TestNewPartitionTakesFirstFullTick(t *testing.T) {
	m := New(2)
	m.Add(0, 3) // served since just before the tick
	m.Tick(10*time.Second, time.Minute, []int{0})
	assert.Zero(t, m.Rate(0), "the partial first tick is discarded")
	m.Add(0, 1000)
	m.Tick(10*time.Second, time.Minute, []int{0})
	assert.Equal(t, 100.0, m.Rate(0), "the first full tick's rate")
	m.Add(0, 2000)
	m.Tick(10*time.Second, time.Minute, []int{0})
	// The two ticks averaged with weights exp(-10s/1m) and 1.
	w := math.Exp(-1.0 / 6)
	assert.InDelta(t, (100*w+200)/(w+1), m.Rate(0), 1e-9)
}

// TestMeterSmooths: once measured, the rate follows a step with the
// window as time constant, by a weight that depends on the elapsed time,
// not on how often the meter ticks.
func TestMeterSmooths(t *testing.T) {
	fine, coarse := New(1), New(1)
	for _, m := range []*Meter{fine, coarse} {
		m.Tick(time.Second, time.Minute, []int{0}) // first served
		for range 3600 {                           // an hour at 0 units/s: the meter holds its weight
			m.Tick(time.Second, time.Minute, []int{0})
		}
	}
	for range 600 { // 60s of 100 units/s, ticking every 100ms
		fine.Add(0, 10)
		fine.Tick(100*time.Millisecond, time.Minute, []int{0})
	}
	coarse.Add(0, 6000)
	coarse.Tick(time.Minute, time.Minute, []int{0})
	assert.InDelta(t, 100*(1-math.Exp(-1)), fine.Rate(0), 0.5, "one window: 1-1/e of the way")
	assert.InDelta(t, fine.Rate(0), coarse.Rate(0), 0.5, "the same minute ticked once")
}

// TestMeterResetsWhatItDoesNotServe: a partition the node stops serving
// loses its rate and its count; served again, it is measured afresh.
func TestMeterResetsWhatItDoesNotServe(t *testing.T) {
	m := New(3)
	m.Tick(time.Second, time.Minute, []int{0, 1})
	m.Add(0, 50)
	m.Add(1, 80)
	m.Add(2, 10)
	m.Tick(time.Second, time.Minute, []int{0, 1, -1, 7})
	assert.Equal(t, 50.0, m.Rate(0))
	assert.Equal(t, 80.0, m.Rate(1))
	assert.Zero(t, m.Rate(2), "not served")
	m.Add(1, 80)
	m.Tick(time.Second, time.Minute, []int{0})
	assert.Zero(t, m.Rate(1), "given up")
	m.Add(1, 40)
	m.Tick(time.Second, time.Minute, []int{0, 1})
	assert.Zero(t, m.Rate(1), "served again: a partial tick first")
	m.Add(1, 40)
	m.Tick(time.Second, time.Minute, []int{0, 1})
	assert.Equal(t, 40.0, m.Rate(1), "measured afresh, nothing left of the 80")
	m.Tick(0, time.Minute, []int{0})
	m.Tick(time.Second, 0, []int{0})
	assert.Equal(t, 40.0, m.Rate(1), "no elapsed time or no window: nothing changes")
	assert.Zero(t, m.Rate(-1))
	assert.Zero(t, m.Rate(3))
}

// TestReport: a report lists the served partitions with load, rounded to
// three significant digits.
func TestReport(t *testing.T) {
	m := New(4)
	owned := []int{0, 1, 3}
	m.Tick(time.Second, time.Minute, owned)
	m.Add(0, 632)
	m.Add(3, 1)
	m.Tick(10*time.Second, time.Minute, owned)
	r := m.Report(time.Minute, owned)
	require.Equal(t, []int{0, 3}, r.Partitions, "no load, no entry")
	assert.Equal(t, []float64{63.2, 0.1}, r.Loads)
	assert.Equal(t, 60.0, r.Window)
	assert.Equal(t, 63.2, Round3(63.2120558))
	assert.Equal(t, 0.00123, Round3(0.001234))
	for _, x := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1), 5e-324} {
		assert.Zero(t, Round3(x), "%v", x)
	}
}
