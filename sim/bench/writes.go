package bench

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/workload"
)

// value is the value of every write: 32 bytes.
var value = []byte("a value of some thirty-two bytes")

// newStore returns an etcdfence.Store under a fresh prefix, and the
// prefix of its data keys.
func newStore(e *env, cli *clientv3.Client, stem string) (*etcdfence.Store, string, error) {
	name := e.name(stem)
	cfg := etcdfence.DefaultConfig()
	cfg.Prefix = "/bench/" + name + "/data/"
	cfg.ClusterPrefix = "/bench/" + name + "/"
	s, err := etcdfence.New(cli, cfg)
	return s, cfg.Prefix, err
}

func runPut(ctx context.Context, e *env) ([]Section, error) {
	var secs []Section
	for _, members := range []int{1, 3} {
		s, err := putSection(ctx, e, members)
		if err != nil {
			return nil, err
		}
		secs = append(secs, s)
	}
	return secs, nil
}

// putSection compares, on one etcd of the given size, a fenced Put with a
// plain Put and with a plain Put in a transaction, one writer, sequential.
func putSection(ctx context.Context, e *env, members int) (Section, error) {
	cfg := e.cfg
	cli, err := e.client(ctx, members)
	if err != nil {
		return Section{}, err
	}
	defer cli.Close()
	s, prefix, err := newStore(e, cli, "put")
	if err != nil {
		return Section{}, err
	}
	tok := fence.Token{Scope: "p/1", Epoch: 1}
	if err := s.Advance(ctx, tok); err != nil {
		return Section{}, err
	}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	n := cfg.scaled(150, 60)
	rounds := cfg.rounds() * cfg.scaled(3, 1) // short rounds: bursts of load hit every implementation
	timed := func(op func(i int) error) func(context.Context) (float64, error) {
		return func(context.Context) (float64, error) {
			start := time.Now()
			for i := range n {
				if err := op(i); err != nil {
					return 0, err
				}
			}
			return float64(time.Since(start).Microseconds()) / float64(n), nil
		}
	}
	cands := []candidate{
		{"plain etcd `Put`", timed(func(i int) error {
			_, err := cli.Put(ctx, prefix+keys[i%len(keys)], string(value))
			return err
		})},
		{"plain `Put` in a `Txn`", timed(func(i int) error {
			_, err := cli.Txn(ctx).Then(clientv3.OpPut(prefix+keys[i%len(keys)], string(value))).Commit()
			return err
		})},
		{"tenure fenced `etcdfence.Store.Put`", timed(func(i int) error {
			_, err := s.Put(ctx, tok, keys[i%len(keys)], value)
			return err
		})},
	}
	// Warm up every path once.
	for _, c := range cands {
		if _, err := c.run(ctx); err != nil {
			return Section{}, err
		}
	}
	samples, err := interleave(ctx, rounds, cands)
	if err != nil {
		return Section{}, err
	}
	return Section{
		Key:   "put",
		Title: fmt.Sprintf("Fenced write vs plain put, %s", membersText(members)),
		Intro: fmt.Sprintf("One writer, sequential, 32-byte values over 1,024 keys; %d writes per round, %d rounds interleaved.", n, rounds),
		Unit:  "µs/write",
		Rows:  rowsFrom(cands, samples, 0),
		Notes: []string{"The fenced Put is one transaction: compare the scope's floor, put the floor and the value."},
	}, nil
}

func runGroup(ctx context.Context, e *env) ([]Section, error) {
	var secs []Section
	for _, members := range []int{1, 3} {
		s, err := groupSection(ctx, e, members)
		if err != nil {
			return nil, err
		}
		secs = append(secs, s)
	}
	return secs, nil
}

// groupSection compares 16 writers' fenced Puts grouped by a Batcher with
// the same writers writing one transaction each and with the ceiling:
// one goroutine writing unfenced transactions of 16 Puts (as
// BenchmarkCeiling16 in fence/etcdfence). Each candidate runs for a timed
// round, which measures it in its steady state: a fixed number of writes
// would charge group commit for the ramp and drain of its batches at each
// end of a round.
func groupSection(ctx context.Context, e *env, members int) (Section, error) {
	const writers = 16
	cfg := e.cfg
	round := time.Duration(cfg.scaled(100, 25)) * time.Millisecond
	rounds := cfg.rounds() * cfg.scaled(2, 1)
	cli, err := e.client(ctx, members)
	if err != nil {
		return Section{}, err
	}
	defer cli.Close()
	s, prefix, err := newStore(e, cli, "group")
	if err != nil {
		return Section{}, err
	}
	bt, err := etcdfence.NewBatcher(s, etcdfence.BatcherConfig{})
	if err != nil {
		return Section{}, err
	}
	defer bt.Close()
	token := func(w int) fence.Token { return fence.Token{Scope: fence.PartitionScope(w), Epoch: 1} }
	key := func(w, i int) string { return fmt.Sprintf("w%d/k%d", w, i%256) }
	// timed runs op on workers goroutines for a round and returns the
	// wall time per write; each call of op makes per writes.
	timed := func(workers, per int, op func(w, i int) error) func(context.Context) (float64, error) {
		return func(context.Context) (float64, error) {
			start := time.Now()
			calls, err := workload.RunFor(round, workers, op)
			if err != nil {
				return 0, err
			}
			return float64(time.Since(start).Microseconds()) / float64(calls*per), nil
		}
	}
	ops := make([]clientv3.Op, writers)
	writes := make([]etcdfence.Write, writers)
	cands := []candidate{
		{"tenure group commit (`etcdfence.Batcher`, 16 writers)", timed(writers, 1, func(w, i int) error {
			_, err := bt.Put(ctx, token(w), key(w, i), value)
			return err
		})},
		{"tenure single fenced writes (16 writers, `Store.Put` each)", timed(writers, 1, func(w, i int) error {
			_, err := s.Put(ctx, token(w), key(w, i), value)
			return err
		})},
		{"tenure `Store.Commit` of 16 fenced writes (one goroutine)", timed(1, writers, func(_, i int) error {
			for w := range writes {
				writes[w] = etcdfence.Write{Kind: etcdfence.KindPut, Token: token(w), Key: key(w, i), Value: value}
			}
			_, err := s.Commit(ctx, writes)
			return err
		})},
		{"ceiling: unfenced `Txn` of 16 Puts (one goroutine)", timed(1, writers, func(_, i int) error {
			for w := range ops {
				ops[w] = clientv3.OpPut(prefix+key(w, i), string(value))
			}
			_, err := cli.Txn(ctx).Then(ops...).Commit()
			return err
		})},
	}
	for _, c := range cands {
		if _, err := c.run(ctx); err != nil {
			return Section{}, err
		}
	}
	st0 := bt.Stats()
	samples, err := interleave(ctx, rounds, cands)
	if err != nil {
		return Section{}, err
	}
	rows := rowsFrom(cands, samples, 0)
	st := bt.Stats()
	if c := st.Commits - st0.Commits; c > 0 {
		rows[0].Note = fmt.Sprintf("%.1f writes per transaction", float64(st.Writes-st0.Writes)/float64(c))
	}
	single, grouped, ceiling := rows[1].Value, rows[0].Value, rows[3].Value
	return Section{
		Key:   "group",
		Title: fmt.Sprintf("Group commit, 16 writers, %s", membersText(members)),
		Intro: fmt.Sprintf("Each of 16 writers owns its partition and writes 32-byte values; rounds of %v, %d interleaved. µs/write is wall time per write: the inverse of throughput.", round, rounds),
		Unit:  "µs/write",
		Rows:  rows,
		Notes: []string{fmt.Sprintf("Throughput: group commit %.1fx single fenced writes; %.2f of the unfenced ceiling.", ratio(single, grouped), ratio(ceiling, grouped))},
	}, nil
}
