package router

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/retry"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
)

// waitSpec reads the spec of the fleet under prefix, waiting while etcd
// does not answer or no node has created the spec yet, until ctx ends.
func waitSpec(ctx context.Context, etcd fleet.FleetClient, prefix string, log hclog.Logger, clk clockwork.Clock) (ring.Spec, error) {
	read := func() (ring.Spec, error) {
		var spec ring.Spec
		err := etcderr.Reach(ctx, etcderr.FirstCall{What: "read the fleet's spec", Log: log, Client: etcd, Unavailable: ownership.ErrUnavailable}, func(ctx context.Context) error {
			var err error
			spec, err = fleet.ReadSpec(ctx, etcd, prefix)
			return err
		})
		return spec, err
	}
	spec, err := read()
	if !errors.Is(err, fleet.ErrNoSpec) {
		return spec, err
	}
	// No node has joined yet. Watch the spec key (the watch is in place
	// once etcd confirms it), read again, and then read at each change.
	start := clk.Now()
	log.Warn("the fleet has no spec yet (no node has joined it); waiting for one", "prefix", prefix)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	key := keys.ForPrefix(prefix).Spec()
	wch := etcd.Watch(wctx, key, clientv3.WithCreatedNotify())
	failed := 0 // watches in a row that ended without a response
	gaveUp := func() error {
		return fmt.Errorf("router: %w: waited %v: %w", err, clk.Since(start).Round(time.Millisecond), context.Cause(ctx))
	}
	for {
		select {
		case resp, ok := <-wch:
			if !ok || resp.Canceled {
				// The watch failed: start another one after a delay, and
				// read again once it is in place.
				failed++
				log.Debug("the watch of the fleet's spec ended; watching again", "prefix", prefix, "failed", failed, "error", resp.Err())
				if retry.Background().Wait(ctx, clk, failed) != nil {
					return ring.Spec{}, gaveUp()
				}
				wch = etcd.Watch(wctx, key, clientv3.WithCreatedNotify())
				continue
			}
			failed = 0
		case <-ctx.Done():
			return ring.Spec{}, gaveUp()
		}
		var rerr error
		spec, rerr = read()
		if !errors.Is(rerr, fleet.ErrNoSpec) {
			if rerr == nil {
				log.Info("the fleet's spec appeared", "prefix", prefix, "partitions", spec.Partitions, "waited", clk.Since(start).Round(time.Millisecond))
			}
			return spec, rerr
		}
	}
}

// assertSpec returns an *ring.SpecMismatchError if cfg asserts a
// partition count, load factor or ring algorithm that differs from the
// fleet's spec.
func assertSpec(fleet ring.Spec, cfg ClientConfig) error {
	local := fleet
	field := ""
	switch {
	case cfg.Partitions != 0 && cfg.Partitions != fleet.Partitions:
		field, local.Partitions = "partitions", cfg.Partitions
	case cfg.LoadFactor != 0 && cfg.LoadFactor != fleet.LoadFactor:
		field, local.LoadFactor = "load factor", cfg.LoadFactor
	case cfg.Algorithm != 0 && cfg.Algorithm != fleet.RingAlgorithm:
		field, local.RingAlgorithm = "ring algorithm", cfg.Algorithm
	default:
		return nil
	}
	return fmt.Errorf("router: %w", &ring.SpecMismatchError{Field: field, Fleet: fleet, Local: local})
}
