// Package fleettest holds the checks and waits of tests that run a fleet
// on a real etcd (sim/cluster): a fleet settled (Unstable, StableErr), an
// Observer that agrees with the nodes, a client that routes a key to an
// address (WaitRoute), the claims as etcd holds them, and fleets written
// by hand for test servers that play nodes (Handmade). tenure's own tests
// use it, and so can yours. It sees a node through the methods an
// ownership.Node exports (Node), so that ownership's own tests can use it
// too.
package fleettest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
)

// Node is what the checks read of an ownership.Node.
type Node interface {
	ID() string
	Ring() *ring.Ring
	LookupPartition(p int) fleet.Route
	Changed() <-chan struct{}
}

// StableErr returns nil once nodes agree on a ring of exactly their IDs
// and every partition is served by its ring owner, as every node sees it,
// at the address <owner>.test:7000.
func StableErr[N Node](nodes []N) error {
	return StableAtErr(nodes, func(id string) string { return id + ".test:7000" })
}

// StableAtErr is StableErr with the owner's address given by addr; a nil
// addr takes the address the owner itself advertises.
func StableAtErr[N Node](nodes []N, addr func(id string) string) error {
	if len(nodes) == 0 {
		return nil
	}
	ids := make([]string, len(nodes))
	byID := map[string]N{}
	for i, n := range nodes {
		ids[i] = n.ID()
		byID[n.ID()] = n
	}
	slices.Sort(ids)
	r := nodes[0].Ring()
	if !slices.Equal(r.Members(), ids) {
		return fmt.Errorf("%s sees members %v, want %v", nodes[0].ID(), r.Members(), ids)
	}
	for _, n := range nodes[1:] {
		if v := n.Ring().Version(); v != r.Version() {
			return fmt.Errorf("%s has ring version %x, %s has %x", n.ID(), v, nodes[0].ID(), r.Version())
		}
	}
	for p := range r.Partitions() {
		owner, _ := r.Owner(p)
		want := byID[owner].LookupPartition(p)
		if !want.Local || want.Owner != owner || want.Epoch == 0 {
			return fmt.Errorf("partition %d: ring owner %s does not serve it: %+v", p, owner, want)
		}
		for _, n := range nodes {
			got := n.LookupPartition(p)
			wantAddr := want.Addr
			if addr != nil {
				wantAddr = addr(owner)
			}
			if got.Owner != owner || got.Epoch != want.Epoch || got.Addr != wantAddr || got.Local != (n.ID() == owner) {
				return fmt.Errorf("partition %d: %s sees %+v, owner serves %+v", p, n.ID(), got, want)
			}
		}
	}
	return nil
}

// WaitFor re-evaluates cond whenever one of changed's channels closes,
// until cond returns nil or timeout passes.
func WaitFor(timeout time.Duration, cond func() error, changed ...func() <-chan struct{}) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		cases := []reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline.C)},
		}
		for _, c := range changed {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c())})
		}
		err := cond()
		if err == nil {
			return nil
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			return fmt.Errorf("not reached after %v: %w", timeout, err)
		}
	}
}

// Changes returns the Changed methods of nodes, for WaitFor.
func Changes[N Node](nodes ...N) []func() <-chan struct{} {
	out := make([]func() <-chan struct{}, len(nodes))
	for i, n := range nodes {
		out[i] = n.Changed
	}
	return out
}

// ObserverAgrees reports how o's routes differ from n's, nil if they do
// not: owner, address, epoch and ring version of every partition.
func ObserverAgrees(o *fleet.Observer, n Node, parts int) error {
	for p := range parts {
		got, want := o.LookupPartition(p), n.LookupPartition(p)
		if got.Owner != want.Owner || got.Addr != want.Addr || got.Epoch != want.Epoch || got.RingVersion != want.RingVersion {
			return fmt.Errorf("partition %d: observer %+v, node %+v", p, got, want)
		}
	}
	return nil
}

// WaitObserver waits, on the observer's and the nodes' Changed signals,
// until cond returns nil, and fails t after 20s.
func WaitObserver[N Node](t testing.TB, o *fleet.Observer, cond func() error, nodes ...N) {
	t.Helper()
	if err := WaitFor(20*time.Second, cond, append(Changes(nodes...), o.Changed)...); err != nil {
		t.Fatalf("observer did not agree: %v", err)
	}
}

// Claim is a partition's claim as etcd holds it: its holder, its epoch
// (keys.ClaimEpoch: the claim's ModRevision), the holder's lease and when the holder
// created it, by its clock.
type Claim struct {
	Owner string
	Epoch int64
	Lease clientv3.LeaseID
	Since time.Time
}

// EtcdClaims returns the owner and epoch of every claim of cluster in
// etcd.
func EtcdClaims(t testing.TB, cli *clientv3.Client, cluster string) map[int]Claim {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := keys.New(cluster)
	resp, err := cli.Get(ctx, l.Claims(), clientv3.WithPrefix())
	require.NoError(t, err)
	out := map[int]Claim{}
	for _, kv := range resp.Kvs {
		p, ok := l.ClaimPartition(string(kv.Key))
		require.True(t, ok, "claim key %q", kv.Key)
		out[p] = Claim(fleetview.ClaimOf(kv))
	}
	return out
}

// WaitUntil waits until check reports no reason, checking again each time
// the channel it returned closes, and fails tb with what and the last
// reason after timeout. check must take its channel before it looks, so
// that no change is missed.
func WaitUntil(tb testing.TB, timeout time.Duration, what string, check func() (why string, changed <-chan struct{})) {
	tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		why, ch := check()
		if why == "" {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			tb.Fatalf("%s: %s", what, why)
		}
	}
}

// Unstable returns why nodes have not settled yet, and a channel that
// closes when the node in question sees a change; "" when every node sees
// the nodes and the ghosts as the ring, and every partition claimed by its
// ring owner, which serves it. Ghosts are members registered outside the
// fleet that never claim: a ghost's partition is settled once no one
// else's claim stands, so that the route names the ghost.
func Unstable[N Node](nodes []N, ghosts ...string) (string, <-chan struct{}) {
	ids := make([]string, 0, len(nodes)+len(ghosts))
	for _, n := range nodes {
		ids = append(ids, n.ID())
	}
	ids = append(ids, ghosts...)
	slices.Sort(ids)
	for _, n := range nodes {
		ch := n.Changed()
		r := n.Ring()
		if !slices.Equal(r.Members(), ids) {
			return fmt.Sprintf("%s sees members %v, want %v", n.ID(), r.Members(), ids), ch
		}
		for p := range r.Partitions() {
			route := n.LookupPartition(p)
			want, _ := r.Owner(p)
			if slices.Contains(ghosts, want) {
				if route.Owner != want || route.Local {
					return fmt.Sprintf("%s: partition %d routes to %q (local=%v), want ghost %q", n.ID(), p, route.Owner, route.Local, want), ch
				}
				continue
			}
			if route.Owner != want || route.Epoch == 0 {
				return fmt.Sprintf("%s: partition %d owner %q epoch %d, want %q claimed", n.ID(), p, route.Owner, route.Epoch, want), ch
			}
			if (want == n.ID()) != route.Local {
				return fmt.Sprintf("%s: partition %d local=%v", n.ID(), p, route.Local), ch
			}
		}
	}
	return "", nil
}

// Server is a node that says where a key goes (an ownership.Node is one).
type Server interface {
	ID() string
	Lookup(key string) fleet.Route
}

// KeyOwnedBy returns the first key "<prefix>-<i>" that n serves, and fails
// tb if there is none among the first 100,000.
func KeyOwnedBy(tb testing.TB, n Server, prefix string) string {
	tb.Helper()
	for i := range 100000 {
		if k := fmt.Sprintf("%s-%d", prefix, i); n.Lookup(k).Local {
			return k
		}
	}
	tb.Fatalf("no key owned by %s", n.ID())
	return ""
}

// Router is a reader of a fleet that routes keys: a router.Client or a
// grpcroute.Conn.
type Router interface {
	Lookup(key string) fleet.Route
	Changed() <-chan struct{}
}

// WaitRoute waits until r routes key to addr, and fails tb after ten
// seconds.
func WaitRoute(tb testing.TB, r Router, key, addr string) {
	tb.Helper()
	WaitUntil(tb, 10*time.Second, "the route of "+key, func() (string, <-chan struct{}) {
		ch := r.Changed()
		if got := r.Lookup(key).Addr; got != addr {
			return "to " + got + ", want " + addr, ch
		}
		return "", nil
	})
}

// Refusals records the keys a node's Hold has refused, for tests in which
// calls must wait for the node: a node type of the test wraps its Hold and
// passes each answer to Record.
type Refusals struct {
	mu      sync.Mutex
	refused map[string]bool
	changed chan struct{} // closed at the next new key refused
}

// Record records key if err is not nil.
func (r *Refusals) Record(key string, err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refused == nil {
		r.refused, r.changed = map[string]bool{}, make(chan struct{})
	}
	if !r.refused[key] {
		r.refused[key] = true
		close(r.changed)
		r.changed = make(chan struct{})
	}
}

// WaitRefused waits until Hold has refused every one of keys, and fails tb
// if a key arrives on served first (a call served before it should have
// been) or if a minute passes.
func (r *Refusals) WaitRefused(tb testing.TB, served <-chan string, keys ...string) {
	tb.Helper()
	deadline := time.After(time.Minute)
	for {
		r.mu.Lock()
		if r.refused == nil {
			r.refused, r.changed = map[string]bool{}, make(chan struct{})
		}
		all, ch := true, r.changed
		for _, k := range keys {
			all = all && r.refused[k]
		}
		r.mu.Unlock()
		if all {
			return
		}
		select {
		case <-ch:
		case key := <-served:
			tb.Fatalf("the call of %q was served before the node admitted it", key)
		case <-deadline:
			tb.Fatalf("not every call of %q reached the node", keys)
		}
	}
}
