package grpcroute

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/resolver"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/retry"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
)

// scheme is the URL scheme of the targets a Client resolves.
const scheme = "tenure"

// Target returns the target of the fleet of cluster (whose keys live under
// fleet.DefaultPrefix(cluster)): "tenure:///<cluster>".
func Target(cluster string) string { return scheme + ":///" + url.PathEscape(cluster) }

// TargetPrefix returns the target of the fleet whose keys live under
// prefix: "tenure:///?prefix=<prefix>".
func TargetPrefix(prefix string) string { return scheme + ":///?prefix=" + url.QueryEscape(prefix) }

// parseTarget returns the cluster or prefix a target names.
func parseTarget(t resolver.Target) (cluster, prefix string, err error) {
	cluster = strings.TrimPrefix(t.URL.Path, "/")
	prefix = t.URL.Query().Get("prefix")
	if err := keys.CheckFleet(cluster, prefix); err != nil {
		return "", "", fmt.Errorf("%w: target %q: %v", ErrInvalidConfig, t.URL.String(), err)
	}
	return cluster, prefix, nil
}

// observerAttr is the attribute key of the *fleet.Observer a resolver
// hands its balancer in resolver.State.Attributes.
type observerAttr struct{}

// resolverBuilder builds the resolvers of a Client's connections, and
// shares each one's view of the fleet with conn, if not nil (the Conn the
// builder was made for).
type resolverBuilder struct {
	c    *Client
	conn *connView
}

func (b *resolverBuilder) Scheme() string { return scheme }

// Build starts following the fleet the target names: it reads the
// fleet's spec (waiting for it, and retrying while etcd does not answer,
// reporting why to the connection), then follows the fleet's members and
// claims through a fleet.Observer, and gives the connection the address of
// every partition's owner at each change of the fleet.
func (b *resolverBuilder) Build(t resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	cluster, prefix, err := parseTarget(t)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &fleetResolver{c: b.c, cc: cc, conn: b.conn, cluster: cluster, prefix: prefix, cancel: cancel}
	r.wg.Go(func() { r.run(ctx) })
	return r, nil
}

// fleetResolver resolves one connection's target.
type fleetResolver struct {
	c               *Client
	cc              resolver.ClientConn
	conn            *connView // nil: no Conn to tell
	cluster, prefix string
	cancel          context.CancelFunc
	wg              sync.WaitGroup
}

func (r *fleetResolver) ResolveNow(resolver.ResolveNowOptions) {}

// Close stops following the fleet.
func (r *fleetResolver) Close() {
	r.cancel()
	r.wg.Wait()
}

// run follows the fleet until ctx ends.
func (r *fleetResolver) run(ctx context.Context) {
	v, err := r.observe(ctx)
	if err != nil {
		return // ctx ended
	}
	defer v.obs.Close()
	if r.conn != nil {
		r.conn.set(v)
		defer r.conn.unset(v)
	}
	for {
		changed := v.obs.Changed()
		if r.conn != nil {
			r.conn.changes.Notify()
		}
		if err := r.cc.UpdateState(stateOf(v)); err != nil {
			r.c.log.Debug("connection refused the fleet's addresses", "error", err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// observe reads the fleet's spec and returns an Observer of the fleet,
// retrying as retry.Background describes until ctx ends.
func (r *fleetResolver) observe(ctx context.Context) (*view, error) {
	pfx := r.prefix
	if pfx == "" {
		pfx = fleet.DefaultPrefix(r.cluster)
	}
	var v *view
	err := retry.Do(ctx, r.c.cfg.Clock, retry.Background(), func(int) (bool, error) {
		spec, err := fleet.ReadSpec(ctx, r.c.etcd, pfx)
		var obs *fleet.Observer
		if err == nil {
			obs, err = fleet.Observe(ctx, r.c.etcd, fleet.ObserverConfig{Cluster: r.cluster, Prefix: r.prefix,
				Ring: spec.Config(), Logger: r.c.log, Clock: r.c.cfg.Clock})
		}
		switch {
		case err == nil:
			v = &view{obs: obs, partitions: spec.Partitions, log: r.c.log}
			return true, nil
		case ctx.Err() != nil:
			return true, ctx.Err()
		case errors.Is(err, ring.ErrInvalidSpec):
			r.c.log.Error("the fleet's spec cannot be used; retrying", "prefix", pfx, "error", err)
		default:
			r.c.log.Debug("waiting for the fleet", "prefix", pfx, "error", err)
		}
		r.cc.ReportError(fmt.Errorf("grpcroute: fleet %q: %w", pfx, err))
		return false, err
	})
	return v, err
}

// view is what a resolver hands its balancer: the Observer of the fleet,
// the fleet's partition count, and the Client's logger.
type view struct {
	obs        *fleet.Observer
	partitions int
	log        hclog.Logger
}

// stateOf returns the resolver state of the fleet v sees: one endpoint per
// address that a partition routes to, and v for the balancer. Each
// address is its own ServerName, so that a connection's transport
// credentials verify the node it dials by the address the node
// advertises (the target's authority names the fleet, no host), unless
// grpc.WithAuthority names one for every node.
func stateOf(v *view) resolver.State {
	seen := map[string]bool{}
	var eps []resolver.Endpoint
	for p := range v.partitions {
		if addr := v.obs.LookupPartition(p).Addr; addr != "" && !seen[addr] {
			seen[addr] = true
			eps = append(eps, resolver.Endpoint{Addresses: []resolver.Address{{Addr: addr, ServerName: addr}}})
		}
	}
	return resolver.State{Endpoints: eps, Attributes: attributes.New(observerAttr{}, v)}
}
