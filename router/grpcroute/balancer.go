package grpcroute

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router/internal/follow"
)

// balancerName is the name of the load-balancing policy that sends each
// call to its key's owner. A Client's connections select it; it works only
// with a Client's resolver, which hands it the fleet's view.
const balancerName = "tenure_owner"

// serviceConfig selects the owner balancer.
const serviceConfig = `{"loadBalancingConfig":[{"` + balancerName + `":{}}]}`

// grpc-go finds load-balancing policies by name in its own registry only;
// the builder holds no state: each connection's balancer gets its fleet's
// view from its resolver.
func init() { balancer.Register(ownerBuilder{}) }

type ownerBuilder struct{}

func (ownerBuilder) Name() string { return balancerName }

func (ownerBuilder) Build(cc balancer.ClientConn, _ balancer.BuildOptions) balancer.Balancer {
	return &ownerBalancer{cc: cc, conns: map[string]*subConn{}}
}

// ownerBalancer keeps one connection to every node that owns a partition,
// and picks for each call the connection to its key's owner. grpc-go calls
// its methods from one goroutine at a time.
type ownerBalancer struct {
	cc    balancer.ClientConn
	view  *view
	conns map[string]*subConn // by address
}

type subConn struct {
	sc      balancer.SubConn
	state   connectivity.State
	failing bool // failed since it was last ready (logged once)
}

func (b *ownerBalancer) UpdateClientConnState(s balancer.ClientConnState) error {
	v, _ := s.ResolverState.Attributes.Value(observerAttr{}).(*view)
	if v == nil {
		return balancer.ErrBadResolverState
	}
	b.view = v
	want := map[string]bool{}
	for _, ep := range s.ResolverState.Endpoints {
		for _, a := range ep.Addresses {
			want[a.Addr] = true
			if b.conns[a.Addr] != nil {
				continue
			}
			sc := &subConn{state: connectivity.Idle}
			var err error
			//lint:ignore SA1019 one address per SubConn, as the deprecation asks
			sc.sc, err = b.cc.NewSubConn([]resolver.Address{a}, balancer.NewSubConnOptions{
				StateListener: func(st balancer.SubConnState) { b.subConnState(a.Addr, sc, st) },
			})
			if err != nil {
				continue
			}
			b.conns[a.Addr] = sc
			sc.sc.Connect()
		}
	}
	for addr, sc := range b.conns {
		if !want[addr] {
			sc.sc.Shutdown()
			delete(b.conns, addr)
		}
	}
	b.publish()
	return nil
}

// subConnState records a connection's new state; an idle one (its node
// closed it) is connected again: the node may own partitions again soon.
// A connection that starts failing is logged with its error (a refused
// TLS handshake, say), once until it is ready again: the calls for its
// node's keys wait for it, and end at their deadlines, without that
// error.
func (b *ownerBalancer) subConnState(addr string, sc *subConn, st balancer.SubConnState) {
	if b.conns[addr] != sc {
		return // shut down
	}
	switch st.ConnectivityState {
	case connectivity.TransientFailure:
		if !sc.failing {
			b.view.log.Warn("cannot connect to a node; its keys' calls wait", "addr", addr, "error", st.ConnectionError)
		}
		sc.failing = true
	case connectivity.Ready:
		sc.failing = false
	}
	sc.state = st.ConnectivityState
	if sc.state == connectivity.Idle {
		sc.sc.Connect()
	}
	b.publish()
}

// publish gives the connection a new picker of the ready connections.
// Calls waiting for their owner's connection pick again with it.
func (b *ownerBalancer) publish() {
	p := &picker{view: b.view, ready: map[string]balancer.SubConn{}}
	state := connectivity.Connecting
	for addr, sc := range b.conns {
		if sc.state == connectivity.Ready {
			p.ready[addr] = sc.sc
			state = connectivity.Ready
		}
	}
	b.cc.UpdateState(balancer.State{ConnectivityState: state, Picker: p})
}

func (b *ownerBalancer) ResolverError(err error) {
	if b.view == nil {
		b.cc.UpdateState(balancer.State{ConnectivityState: connectivity.TransientFailure,
			Picker: &picker{err: status.Errorf(codes.Unavailable, "grpcroute: %v", err)}})
	}
}

func (b *ownerBalancer) UpdateSubConnState(balancer.SubConn, balancer.SubConnState) {}

func (b *ownerBalancer) Close() {
	for addr, sc := range b.conns {
		sc.sc.Shutdown()
		delete(b.conns, addr)
	}
}

func (b *ownerBalancer) ExitIdle() {
	for _, sc := range b.conns {
		if sc.state == connectivity.Idle {
			sc.sc.Connect()
		}
	}
}

// picker sends each call to the ready connection of its key's owner. A
// call whose owner is unknown, or whose owner's connection is not ready,
// waits for the next picker (grpc-go queues it until the connection
// changes or the call's deadline passes): it is never sent to another
// node.
type picker struct {
	view  *view
	ready map[string]balancer.SubConn // ready connections, by address
	err   error                       // the resolver's error before the fleet was read
}

// pickCtx is the context key of a call's *route, which the Client's
// interceptors set.
type pickCtx struct{}

// route is what a call's attempts tell the picker: its key, the hint of
// the last refusal (when it names a newer owner than the view, the picker
// goes there) with the address that refused, and the attempt in progress;
// what the picker tells the call: where it sent the last attempt, and
// when (the attempt's bound counts from then); and what the call has
// learnt of its partition's claims (follow.Progress). The Client's
// interceptors and the picker use a route in turn, one attempt at a time.
type route struct {
	key     string
	hint    fleet.Route // the zero Route for none
	refused string
	picked  atomic.Pointer[pick]    // set by Pick
	attempt atomic.Pointer[attempt] // the attempt in progress, whose clock Pick starts; nil: unbounded
	seen    follow.Progress
	now     bool // the last refusal's hint is news: the next attempt goes at once
}

// pick is where a picker sent an attempt: the route it chose, from the
// view of the connection.
type pick struct {
	route fleet.Route
	view  *view
}

// tried returns the route the picker last sent the call along, the zero
// Route if none.
func (rt *route) tried() fleet.Route {
	if pk := rt.picked.Load(); pk != nil {
		return pk.route
	}
	return fleet.Route{}
}

func (p *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	if p.err != nil {
		return balancer.PickResult{}, p.err
	}
	rt, err := routeOf(info.Ctx)
	if err != nil {
		return balancer.PickResult{}, err
	}
	r := p.choose(rt)
	if sc := p.ready[r.Addr]; sc != nil {
		rt.picked.Store(&pick{route: r, view: p.view})
		rt.attempt.Load().start()
		return balancer.PickResult{SubConn: sc}, nil
	}
	return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
}

// choose returns the route of rt's attempt: the view's, or the hint's
// when the hint names a newer claim of the partition (or the view has no
// address or still names the node that refused; follow.Choose) and a
// connection to the hint's address is ready. A hint never holds a call
// back: without a ready connection to it, the view decides.
func (p *picker) choose(rt *route) fleet.Route {
	r := p.view.obs.Lookup(rt.key)
	h := rt.hint
	if p.ready[h.Addr] == nil {
		h = fleet.Route{}
	}
	return follow.Choose(r, h, rt.refused)
}

// routeOf returns the route the Client's interceptors put in ctx, or one
// for the key of WithKey or of the outgoing metadata.
func routeOf(ctx context.Context) (*route, error) {
	if rt, ok := ctx.Value(pickCtx{}).(*route); ok {
		return rt, nil
	}
	key, err := callKey(ctx)
	if err != nil {
		return nil, err
	}
	return &route{key: key}, nil
}

// callKey returns the key of WithKey in ctx, or else of the outgoing
// metadata.
func callKey(ctx context.Context) (string, error) {
	if k, ok := ctx.Value(keyCtx{}).(string); ok {
		return k, checkKey(k)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	return keyOfMetadata(md.Get(MetadataKey))
}
