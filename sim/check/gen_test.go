package check_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/tenure-go/tenure/sim/check"
)

// sequential records, through a Recorder, a random history of a correct
// system that does one thing at a time: tenures hand off with strictly
// increasing epochs and a floor raise, owners do read-modify-writes (some
// of unknown outcome, applied or not), former owners try stale writes and
// are rejected, clients put, get, increment (with retries of unknown
// increments under the same idempotency key) and count. It returns the
// history and the longest unowned gap.
func sequential(seed uint64, steps int) (*check.History, time.Duration) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	var rec check.Recorder
	scopes := 1 + rng.IntN(4)
	type owner struct {
		holder string
		epoch  int64
		since  time.Duration
	}
	owners := make([]*owner, scopes)
	former := make([]*owner, scopes)
	store := map[string]string{}
	var rev int64
	var t, maxGap time.Duration
	lastEnd := make([]time.Duration, scopes)
	tick := func() time.Duration { t += time.Duration(1+rng.IntN(3)) * time.Millisecond; return t }
	idem := 0
	for range steps {
		s := rng.IntN(scopes)
		scope := "p/" + strconv.Itoa(s)
		key := fmt.Sprintf("k%d-%d", s, rng.IntN(2))
		switch r := rng.IntN(10); {
		case owners[s] == nil || r == 0: // hand off
			if o := owners[s]; o != nil {
				rec.EndTenure(scope, o.epoch, o.holder, tick())
				lastEnd[s] = t
				former[s] = o
			}
			rev++
			o := &owner{holder: "n" + strconv.Itoa(rng.IntN(4)), epoch: rev, since: tick()}
			if gap := t - lastEnd[s]; gap > maxGap {
				maxGap = gap
			}
			rec.BeginTenure(scope, o.epoch, o.holder, t)
			rec.RaiseFloor(scope, o.epoch, tick())
			owners[s] = o
		case r <= 4: // owner's read-modify-write
			o := owners[s]
			read := store[key]
			n, _ := strconv.Atoi(read)
			w := check.Write{Key: key, Scope: scope, Epoch: o.epoch, Writer: o.holder, Read: read, HasRead: true, Value: strconv.Itoa(n + 1), Invoke: tick()}
			id := rec.InvokeWrite(w)
			switch rng.IntN(8) {
			case 0: // unknown, not applied
			case 1: // unknown, applied
				rec.Applied(id, tick())
				store[key] = w.Value
			default:
				rec.Applied(id, tick())
				store[key] = w.Value
				rec.ReturnWrite(id, check.Accepted, tick())
			}
		case r == 5 && former[s] != nil: // a former owner's stale write, rejected
			o := former[s]
			id := rec.InvokeWrite(check.Write{Key: key, Scope: scope, Epoch: o.epoch, Writer: o.holder, Value: "stale", Read: store[key], HasRead: true, Invoke: tick()})
			rec.ReturnWrite(id, check.Rejected, tick())
		case r <= 7: // register put or get
			reg := "r" + strconv.Itoa(s)
			if rng.IntN(2) == 0 {
				v := strconv.Itoa(rng.IntN(1000))
				id := rec.InvokeOp(check.Op{Client: "c", Key: reg, Kind: check.Put, Value: v, Invoke: tick()})
				store[reg] = v
				rec.ReturnOp(id, check.Result{Outcome: check.Accepted, At: tick()})
			} else {
				id := rec.InvokeOp(check.Op{Client: "c", Key: reg, Kind: check.Get, Invoke: tick()})
				rec.ReturnOp(id, check.Result{Outcome: check.Accepted, At: tick(), Value: store[reg]})
			}
		default: // counter increment (perhaps unknown then retried) or count
			ctr := "c" + strconv.Itoa(s)
			n, _ := strconv.ParseInt(store[ctr], 10, 64)
			if rng.IntN(3) == 0 {
				id := rec.InvokeOp(check.Op{Client: "c", Key: ctr, Kind: check.Count, Invoke: tick()})
				rec.ReturnOp(id, check.Result{Outcome: check.Accepted, At: tick(), N: n})
				continue
			}
			idem++
			k := "i" + strconv.Itoa(idem)
			applied := false
			for attempt := 0; ; attempt++ {
				id := rec.InvokeOp(check.Op{Client: "c", Key: ctr, Kind: check.Incr, Delta: 1, IdemKey: k, Invoke: tick()})
				if !applied && rng.IntN(2) == 0 {
					applied = true
					n++
					store[ctr] = strconv.FormatInt(n, 10)
				}
				if attempt < 2 && rng.IntN(4) == 0 {
					continue // the client does not learn the outcome; retry
				}
				if !applied {
					applied = true
					n++
					store[ctr] = strconv.FormatInt(n, 10)
				}
				rec.ReturnOp(id, check.Result{Outcome: check.Accepted, At: tick(), N: n, HasN: true})
				break
			}
		}
	}
	keys := make([]string, 0, len(store))
	for k := range store {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		rec.SetFinal(k, store[k])
	}
	for s := range scopes {
		if gap := t - lastEnd[s]; owners[s] == nil && gap > maxGap {
			maxGap = gap
		}
	}
	return rec.History(), maxGap
}

// concurrent builds a linearizable history of about n client operations
// over keys keys, half registers and half counters, with clients clients
// per key whose operations overlap: each operation takes effect at a
// random point within its interval, and a few return at Never.
func concurrent(seed uint64, n, keys, clients int) *check.History {
	rng := rand.New(rand.NewPCG(seed, 7))
	type pending struct {
		op check.Op
		at time.Duration
	}
	var ps []pending
	perKey := n / keys
	for k := range keys {
		key := "key-" + strconv.Itoa(k)
		counter := k%2 == 1
		clock := make([]time.Duration, clients)
		for i := range perKey {
			c := i % clients
			inv := clock[c] + time.Duration(rng.IntN(5))
			ret := inv + time.Duration(1+rng.IntN(20))
			clock[c] = ret + 1
			op := check.Op{Client: strconv.Itoa(c), Key: key, Invoke: inv, Return: ret, Outcome: check.Accepted}
			switch {
			case counter && rng.IntN(3) == 0:
				op.Kind = check.Count
			case counter:
				op.Kind, op.Delta, op.IdemKey = check.Incr, 1, fmt.Sprintf("%s/%d", key, i)
			case rng.IntN(2) == 0:
				op.Kind, op.Value = check.Put, strconv.Itoa(i)
			default:
				op.Kind = check.Get
			}
			if (op.Kind == check.Put || op.Kind == check.Incr) && rng.IntN(200) == 0 {
				op.Outcome, op.Return = check.Unknown, check.Never
				clock[c] = ret + 1 // the client gives up at ret
				ret = inv + time.Duration(1+rng.IntN(20))
			}
			ps = append(ps, pending{op: op, at: inv + time.Duration(rng.Int64N(int64(ret-inv)+1))})
		}
	}
	slices.SortStableFunc(ps, func(a, b pending) int { return int(a.at - b.at) })
	regs, ctrs := map[string]string{}, map[string]int64{}
	h := &check.History{}
	for i, p := range ps {
		op := p.op
		op.ID = check.OpID(i + 1)
		switch op.Kind {
		case check.Put:
			regs[op.Key] = op.Value
		case check.Get:
			op.Value = regs[op.Key]
		case check.Incr:
			ctrs[op.Key]++
			op.N, op.HasN = ctrs[op.Key], op.Outcome == check.Accepted
		case check.Count:
			op.N, op.HasN = ctrs[op.Key], true
		}
		h.Ops = append(h.Ops, op)
	}
	return h
}
