package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// fault is one planned fault.
type fault struct {
	Kind FaultKind
	// At is when it begins, from the start of the load.
	At time.Duration
	// Hold is how long it lasts before it is healed (the worker resumed or
	// restarted, the member thawed or restarted, the link healed).
	Hold time.Duration
	// Worker is the index of the worker it hits (worker faults); the
	// runner picks another if that one is not up.
	Worker int
}

// faultRecord is a fault as it happened: when it began and was healed, and
// what it hit.
type faultRecord struct {
	fault
	Target        string
	Start, Healed time.Duration
	// Detail says more: where a paused worker stopped.
	Detail string
	Err    error
}

func (r faultRecord) String() string {
	s := fmt.Sprintf("%-18s %-4s at %6.2fs for %v", r.Kind, r.Target, r.Start.Seconds(), (r.Healed - r.Start).Round(time.Millisecond))
	if r.Detail != "" {
		s += " (" + r.Detail + ")"
	}
	if r.Err != nil {
		s += fmt.Sprintf(" (error: %v)", r.Err)
	}
	return s
}

// schedule plans cfg.Faults faults over cfg.Duration: one of each kind
// first, in an order the seed picks, then kinds at random, evenly spaced
// after a warm-up.
func schedule(cfg Config) []fault {
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6368616f73))
	kinds := append([]FaultKind(nil), cfg.Kinds...)
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	warmup := min(3*time.Second, cfg.Duration/10)
	var every time.Duration
	if cfg.Faults > 0 {
		every = (cfg.Duration - warmup) / time.Duration(cfg.Faults)
	}
	jitter := func(d time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(d) + 1)) }
	out := make([]fault, cfg.Faults)
	for i := range out {
		k := kinds[rng.IntN(len(kinds))]
		if i < len(kinds) {
			k = kinds[i]
		}
		f := fault{Kind: k, At: warmup + time.Duration(i)*every, Worker: rng.IntN(cfg.Workers)}
		switch k {
		case Pause, Blackhole:
			// Longer than the TTL: the lease expires and the partitions
			// move while the worker still thinks it holds them.
			f.Hold = cfg.TTL + cfg.TTL/2 + jitter(cfg.TTL/2)
		case Kill:
			f.Hold = cfg.TTL/2 + jitter(cfg.TTL)
		case LeaderKill, LeaderFreeze:
			f.Hold = 1500*time.Millisecond + jitter(time.Second)
		}
		out[i] = f
	}
	return out
}
