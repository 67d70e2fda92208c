package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
)

// fleetsRoot is the key prefix under which every fleet with a default
// prefix lives: /tenure/<cluster>/.
const fleetsRoot = "/tenure/"

// fleetInfo is one fleet found under fleetsRoot.
type fleetInfo struct {
	// Cluster is the fleet's cluster name (its --cluster).
	Cluster string `json:"cluster"`
	// Prefix is its key prefix.
	Prefix string `json:"prefix"`
	// Spec is its spec; nil if it has none (a fleet of elections only, or
	// one no node has joined yet).
	Spec *ring.Spec `json:"spec,omitempty"`
}

// listFleets returns the fleets under fleetsRoot, by name. It reads one
// key per fleet (a skip scan over the names), not every key of every fleet,
// and then each fleet's spec.
func listFleets(ctx context.Context, kv clientv3.KV) ([]fleetInfo, error) {
	out := []fleetInfo{}
	from, end := fleetsRoot, clientv3.GetPrefixRangeEnd(fleetsRoot)
	for {
		resp, err := kv.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(1), clientv3.WithKeysOnly())
		if err != nil {
			return nil, fmt.Errorf("list the fleets under %s: %w", fleetsRoot, err)
		}
		if len(resp.Kvs) == 0 {
			return out, nil
		}
		rest := strings.TrimPrefix(string(resp.Kvs[0].Key), fleetsRoot)
		name, _, ok := strings.Cut(rest, "/")
		if !ok {
			// A key right under the root, not a fleet's: skip past it.
			from = string(resp.Kvs[0].Key) + "\x00"
			continue
		}
		f := fleetInfo{Cluster: name, Prefix: fleet.DefaultPrefix(name)}
		spec, err := fleet.ReadSpec(ctx, kv, f.Prefix)
		switch {
		case err == nil:
			f.Spec = &spec
		case !errors.Is(err, fleet.ErrNoSpec) && !errors.Is(err, ring.ErrInvalidSpec):
			return nil, err
		}
		out = append(out, f)
		from = f.Prefix[:len(f.Prefix)-1] + "0" // the first key after every /tenure/<name>/...
	}
}

// fleetNames lists fleets for a message: "a (64 partitions), b (no spec)",
// or "none".
func fleetNames(fs []fleetInfo) string {
	if len(fs) == 0 {
		return "none"
	}
	names := make([]string, len(fs))
	for i, f := range fs {
		if f.Spec != nil {
			names[i] = fmt.Sprintf("%s (%d partitions)", f.Cluster, f.Spec.Partitions)
		} else {
			names[i] = f.Cluster + " (no spec)"
		}
	}
	return strings.Join(names, ", ")
}

func cmdFleets(g *globals, args []string, out io.Writer) error {
	if err := noArgs("fleets", g, args); err != nil {
		return err
	}
	s, err := dial(g)
	if err != nil {
		return err
	}
	defer s.close()
	fs, err := listFleets(s.ctx, s.cli)
	if err != nil {
		return s.wrap(err)
	}
	return emit(g, out, fs, func(w io.Writer, fs []fleetInfo) {
		fmt.Fprintln(w, "CLUSTER\tPREFIX\tPARTITIONS\tLOAD FACTOR")
		for _, f := range fs {
			if f.Spec == nil {
				fmt.Fprintf(w, "%s\t%s\t-\t-\n", f.Cluster, f.Prefix)
				continue
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%v\n", f.Cluster, f.Prefix, f.Spec.Partitions, f.Spec.LoadFactor)
		}
	})
}

// noFleet is the error of a fleet command without --cluster or --prefix:
// it names the fleets found, so that the operator can choose.
func noFleet(s *session) error {
	fs, err := listFleets(s.ctx, s.cli)
	if err != nil {
		return s.wrap(err)
	}
	return usagef("no fleet chosen: give --cluster NAME (or --prefix P); fleets under %s: %s", fleetsRoot, fleetNames(fs))
}

// missingSpec adds the fleets found to err, an ErrNoSpec of the fleet s
// names.
func missingSpec(s *session, err error) error {
	fs, lerr := listFleets(s.ctx, s.cli)
	if lerr != nil {
		return err
	}
	return fmt.Errorf("%w; fleets under %s: %s", err, fleetsRoot, fleetNames(fs))
}
