package check

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// LinearConfig tunes Linearizable. The zero value checks every key without
// a time limit, on GOMAXPROCS goroutines, and writes no file.
type LinearConfig struct {
	// Timeout bounds the check of each key; a key not decided in time is
	// reported Unknown. Zero means no limit.
	Timeout time.Duration
	// VisualizePath, if not empty, is where porcupine's HTML visualization
	// of the first key (in key order) that is not linearizable is
	// written. Nothing is written when every key is linearizable.
	VisualizePath string
	// Parallelism is how many keys are checked at once; zero means
	// GOMAXPROCS.
	Parallelism int
}

// KeyVerdict is porcupine's verdict on one key.
type KeyVerdict struct {
	Key string
	// Ops counts the operations checked (rejected operations, and reads
	// of unknown outcome, are left out).
	Ops    int
	Result porcupine.CheckResult
}

func (v KeyVerdict) String() string {
	return fmt.Sprintf("key %q (%d operations): %s", v.Key, v.Ops, v.Result)
}

// LinearResult is the result of Linearizable.
type LinearResult struct {
	// Result is porcupine.Ok if every key is linearizable, porcupine.Illegal
	// if some key is not, porcupine.Unknown if some key timed out and none
	// is illegal.
	Result porcupine.CheckResult
	// Keys and Ops count what was checked.
	Keys, Ops int
	// Illegal and Unknown list the keys that are not Ok, in key order.
	Illegal, Unknown []KeyVerdict
	// Visualization is the file written, if any.
	Visualization string
}

// OK reports whether every key was found linearizable.
func (r LinearResult) OK() bool { return r.Result == porcupine.Ok }

// Linearizable checks, with porcupine, that each key's client operations
// are linearizable: a register for keys of Put and Get, a counter with
// idempotent increments for keys of Incr and Count.
//
// A Rejected operation is left out; so is an Unknown Get or Count (it
// constrains nothing). An Unknown Put or Incr returns at Never: it may take
// effect at any point after its invoke, or not at all. An Incr's reply N is
// checked when HasN. A history without operations is linearizable.
func Linearizable(h *History, cfg LinearConfig) (LinearResult, error) {
	if err := h.Validate(); err != nil {
		return LinearResult{}, err
	}
	res := LinearResult{Result: porcupine.Ok}
	if h == nil {
		return res, nil
	}
	if cfg.Parallelism < 0 || cfg.Timeout < 0 {
		return LinearResult{}, fmt.Errorf("%w: parallelism %d and timeout %v must not be negative", ErrInvalidConfig, cfg.Parallelism, cfg.Timeout)
	}
	byKey := make(map[string][]Op)
	for _, o := range h.Ops {
		byKey[o.Key] = append(byKey[o.Key], o)
	}
	keys := sortedKeys(byKey)
	parts := make([]partition, len(keys))
	for i, k := range keys {
		p, err := newPartition(h, k, byKey[k])
		if err != nil {
			return LinearResult{}, err
		}
		parts[i] = p
	}

	workers := cfg.Parallelism
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	verdicts := make([]porcupine.CheckResult, len(parts))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(workers, len(parts)) {
		wg.Go(func() {
			for i := range next {
				verdicts[i] = porcupine.CheckOperationsTimeout(parts[i].model, parts[i].ops, cfg.Timeout)
			}
		})
	}
	for i := range parts {
		next <- i
	}
	close(next)
	wg.Wait()

	res.Keys = len(parts)
	for i, p := range parts {
		res.Ops += len(p.ops)
		v := KeyVerdict{Key: p.key, Ops: len(p.ops), Result: verdicts[i]}
		switch verdicts[i] {
		case porcupine.Illegal:
			res.Illegal = append(res.Illegal, v)
		case porcupine.Unknown:
			res.Unknown = append(res.Unknown, v)
		}
	}
	switch {
	case len(res.Illegal) > 0:
		res.Result = porcupine.Illegal
	case len(res.Unknown) > 0:
		res.Result = porcupine.Unknown
	}
	if cfg.VisualizePath != "" && len(res.Illegal) > 0 {
		i := slices.IndexFunc(parts, func(p partition) bool { return p.key == res.Illegal[0].Key })
		if err := parts[i].visualize(cfg.VisualizePath, cfg.Timeout); err != nil {
			return res, fmt.Errorf("check: visualizing key %q: %w", parts[i].key, err)
		}
		res.Visualization = cfg.VisualizePath
	}
	return res, nil
}

// partition is one key's operations in porcupine's terms.
type partition struct {
	key   string
	model porcupine.Model
	ops   []porcupine.Operation
}

func newPartition(h *History, key string, ops []Op) (partition, error) {
	p := partition{key: key}
	counter := ops[0].Kind.counter()
	if counter {
		init, err := parseCounter(h.Initial, key)
		if err != nil {
			return p, err
		}
		p.model = counterModel(init)
	} else {
		p.model = registerModel(h.Initial[key])
	}
	p.model.DescribeOperationMetadata = func(info any) string {
		if info == nil {
			return ""
		}
		return "op #" + strconv.FormatUint(uint64(info.(OpID)), 10)
	}
	clients := make(map[string]int)
	idem := make(map[string]int)
	for _, o := range ops {
		if o.Outcome == Rejected || (o.Outcome == Unknown && (o.Kind == Get || o.Kind == Count)) {
			continue
		}
		known := o.Outcome == Accepted
		ret := o.Return
		if !known {
			ret = Never
		}
		c, ok := clients[o.Client]
		if !ok {
			c = len(clients)
			clients[o.Client] = c
		}
		po := porcupine.Operation{ClientId: c, Call: int64(o.Invoke), Return: int64(ret), Metadata: o.ID}
		switch o.Kind {
		case Put:
			po.Input, po.Output = regInput{put: true, value: o.Value}, regOutput{}
		case Get:
			po.Input, po.Output = regInput{}, regOutput{known: true, value: o.Value}
		case Incr:
			in := ctrInput{incr: true, delta: o.Delta, idem: -1, name: o.IdemKey}
			if o.IdemKey != "" {
				i, ok := idem[o.IdemKey]
				if !ok {
					i = len(idem)
					idem[o.IdemKey] = i
				}
				in.idem = i
			}
			po.Input, po.Output = in, ctrOutput{known: known && o.HasN, n: o.N}
		case Count:
			po.Input, po.Output = ctrInput{}, ctrOutput{known: true, n: o.N}
		}
		p.ops = append(p.ops, po)
	}
	return p, nil
}

func (p partition) visualize(path string, timeout time.Duration) error {
	_, info := porcupine.CheckOperationsVerbose(p.model, p.ops, timeout)
	return porcupine.VisualizePath(p.model, info, path)
}
