package simulation

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// skewClock is a clock that runs at rate times the speed of its base clock:
// a node whose clock is a few percent fast or slow. Durations handed to its
// timers are local durations (divided by rate on the base clock); the
// instants its timer channels deliver are the base clock's.
type skewClock struct {
	base  clockwork.Clock
	rate  float64
	start time.Time
}

func newSkewClock(base clockwork.Clock, rate float64) clockwork.Clock {
	if rate == 1 {
		return base
	}
	return &skewClock{base: base, rate: rate, start: base.Now()}
}

func (c *skewClock) real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.rate)
}

func (c *skewClock) Now() time.Time {
	return c.start.Add(time.Duration(float64(c.base.Now().Sub(c.start)) * c.rate))
}
func (c *skewClock) After(d time.Duration) <-chan time.Time { return c.base.After(c.real(d)) }
func (c *skewClock) Sleep(d time.Duration)                  { c.base.Sleep(c.real(d)) }
func (c *skewClock) Since(t time.Time) time.Duration        { return c.Now().Sub(t) }
func (c *skewClock) Until(t time.Time) time.Duration        { return t.Sub(c.Now()) }
func (c *skewClock) NewTicker(d time.Duration) clockwork.Ticker {
	return skewTicker{c.base.NewTicker(c.real(d)), c}
}
func (c *skewClock) NewTimer(d time.Duration) clockwork.Timer {
	return skewTimer{c.base.NewTimer(c.real(d)), c}
}
func (c *skewClock) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	return skewTimer{c.base.AfterFunc(c.real(d), f), c}
}

type skewTimer struct {
	clockwork.Timer
	c *skewClock
}

func (t skewTimer) Reset(d time.Duration) bool { return t.Timer.Reset(t.c.real(d)) }

type skewTicker struct {
	clockwork.Ticker
	c *skewClock
}

func (t skewTicker) Reset(d time.Duration) { t.Ticker.Reset(t.c.real(d)) }

// drivers counts the drivers running in the process: other runs' drivers
// are always runnable and do not count as pending work.
var drivers atomic.Int64

// maxSpins bounds the scheduler yields between two steps.
const maxSpins = 256

var runnableSample = []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}
var runnableMu sync.Mutex

// runnable is the process's count of goroutines ready to run but not
// running (0 if the runtime does not report it).
func runnable() uint64 {
	runnableMu.Lock()
	defer runnableMu.Unlock()
	metrics.Read(runnableSample)
	if runnableSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return runnableSample[0].Value.Uint64()
}

// driver advances a fake clock in steps until stopped.
type driver struct {
	fc    *clockwork.FakeClock
	step  time.Duration
	yield time.Duration
	spins int
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

func startDriver(fc *clockwork.FakeClock, step, yield time.Duration, spins int) *driver {
	d := &driver{fc: fc, step: step, yield: yield, spins: spins, stop: make(chan struct{}), done: make(chan struct{})}
	go d.run()
	return d
}

func (d *driver) run() {
	drivers.Add(1)
	defer drivers.Add(-1)
	defer close(d.done)
	for {
		select {
		case <-d.stop:
			return
		default:
		}
		// Let the goroutines woken by the last step run before time moves
		// on: at least spins scheduler yields, more (up to maxSpins) while
		// the process has runnable goroutines, then a short real sleep.
		// On a loaded machine the clock thereby slows down instead of
		// running ahead of the code it times.
		for i := 0; i < maxSpins; i++ {
			runtime.Gosched()
			if i+1 >= d.spins && runnable() <= uint64(drivers.Load()) {
				break
			}
		}
		if d.yield > 0 {
			time.Sleep(d.yield)
		}
		d.fc.Advance(d.step)
	}
}

func (d *driver) Stop() {
	d.once.Do(func() { close(d.stop) })
	<-d.done
}
