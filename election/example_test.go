package election_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/sim/cluster"
)

// Campaign for leadership, write under the term's fence, and resign.
func ExampleElection_Campaign() {
	ctx := context.Background()
	etcd, err := cluster.Start(ctx, cluster.DefaultConfig()) // an embedded etcd, for the example
	if err != nil {
		fmt.Println(err)
		return
	}
	defer etcd.Close()
	cli, err := etcd.Client()
	if err != nil {
		fmt.Println(err)
		return
	}

	// One Session per node, for its whole life.
	session, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer session.Close(ctx)

	e, err := election.NewElection(session, cli, cli, election.ElectionConfig{
		Cluster: "demo", Name: "billing", ID: "node-1", Value: "10.0.0.1:8080",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	term, err := e.Campaign(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("scope:", term.Token().Scope)

	// A write that lands only while this term stands.
	resp, err := cli.Txn(term.Context()).If(term.Cmp()).Then(clientv3.OpPut("/billing/state", "v1")).Commit()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("guarded write applied:", resp.Succeeded)

	leader, err := e.Leader(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("leader:", leader.ID, leader.Value, leader.Epoch == term.Token().Epoch)

	if err := term.Resign(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_, err = e.Leader(ctx)
	fmt.Println("after resign:", errors.Is(err, election.ErrNoLeader), errors.Is(term.Err(), election.ErrNotLeader))
	// Output:
	// scope: leader/billing
	// guarded write applied: true
	// leader: node-1 10.0.0.1:8080 true
	// after resign: true true
}

// Run a leader loop: fn runs under each term until the term ends.
func ExampleElection_Run() {
	ctx := context.Background()
	etcd, err := cluster.Start(ctx, cluster.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer etcd.Close()
	cli, err := etcd.Client()
	if err != nil {
		fmt.Println(err)
		return
	}
	session, err := election.NewSession(ctx, cli, election.DefaultSessionConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer session.Close(ctx)
	e, err := election.NewElection(session, cli, cli, election.ElectionConfig{
		Cluster: "demo",
		Name:    "scheduler",
		Hooks: &election.Hooks{
			OnElected: func(_ context.Context, t fence.Token) { fmt.Println("elected for", t.Scope) },
			OnEnded: func(t fence.Token, reason error) {
				fmt.Println("term ended:", errors.Is(reason, election.ErrNotLeader))
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	var gate fence.Gate // stands in for a store that checks tokens
	runCtx, stop := context.WithCancel(ctx)
	err = e.Run(runCtx, func(ctx context.Context, t fence.Token) error {
		if err := gate.Advance(ctx, t); err != nil {
			return err
		}
		fmt.Println("leading; token admitted")
		stop() // a real leader works until ctx is done
		<-ctx.Done()
		return nil
	})
	fmt.Println("run:", err)
	// Output:
	// elected for leader/scheduler
	// leading; token admitted
	// term ended: true
	// run: context canceled
}

// A leader's read-modify-write on a fenced store. The store is the
// election's fencer too: a term's Campaign raises the store's floor before
// it returns, so a previous leader that read before the change of leader
// cannot write afterwards, even to a key the new leader only reads first.
func Example_fencedReadModifyWrite() {
	ctx := context.Background()
	etcd, err := cluster.Start(ctx, cluster.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer etcd.Close()
	cli, err := etcd.Client()
	if err != nil {
		fmt.Println(err)
		return
	}
	store, err := etcdfence.New(cli, etcdfence.Config{Cluster: "demo", Prefix: "/billing/"})
	if err != nil {
		fmt.Println(err)
		return
	}
	// candidate returns a node's election handle, with store as its fencer.
	var sessions []*election.Session
	defer func() {
		for _, s := range sessions {
			_ = s.Close(ctx)
		}
	}()
	candidate := func(id string) (*election.Election, error) {
		s, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: 5 * time.Second})
		if err != nil {
			return nil, err
		}
		sessions = append(sessions, s)
		return election.NewElection(s, cli, cli, election.ElectionConfig{
			Cluster: "demo", Name: "billing", ID: id,
			Fencers: []fence.Fencer{store},
		})
	}
	// read and write are the two halves of closing a billing period: read
	// the counter, write it back plus one, both under the term's token.
	read := func(t *election.Term) (int, error) {
		it, err := store.Get(t.Context(), t.Token(), "periods")
		if err != nil || !it.Exists() {
			return 0, err
		}
		return strconv.Atoi(string(it.Value))
	}
	write := func(t *election.Term, n int) error {
		_, err := store.Put(context.Background(), t.Token(), "periods", []byte(strconv.Itoa(n)))
		return err
	}

	a, err := candidate("a")
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := candidate("b")
	if err != nil {
		fmt.Println(err)
		return
	}
	ta, err := a.Campaign(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	na, err := read(ta) // a reads, then stalls (a GC pause, say)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("a read:", na)

	if err := ta.Resign(ctx); err != nil { // a's term ends; a does not know yet
		fmt.Println(err)
		return
	}
	tb, err := b.Campaign(ctx) // returns once the store's floor is b's epoch
	if err != nil {
		fmt.Println(err)
		return
	}
	nb, err := read(tb)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("b read:", nb)

	err = write(ta, na+1) // a wakes up and writes what it computed
	fmt.Println("a's write refused:", errors.Is(err, fence.ErrStale))
	if err := write(tb, nb+1); err != nil {
		fmt.Println(err)
		return
	}
	n, err := read(tb)
	fmt.Println("periods closed:", n, err)
	_ = tb.Resign(ctx)
	// Output:
	// a read: 0
	// b read: 0
	// a's write refused: true
	// periods closed: 1 <nil>
}
