package scenario

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/sim/check"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// Scenario is one entry of the corpus.
type Scenario struct {
	Name string
	// Ref names the known failure it replays.
	Ref string
	// Run replays it with the protection on or off and returns the
	// checkers' report; Outcome.Caught says whether something was found.
	Run func(protected bool) (Outcome, error)
}

// Outcome is what one replay found.
type Outcome struct {
	Report *check.Report
	// Panic is a panic the replay recovered from (the unprotected ring).
	Panic string
	// Notes describe what happened, for the corpus table.
	Notes []string
}

// Caught reports whether the replay broke a checked property or panicked.
func (o Outcome) Caught() bool { return o.Panic != "" || (o.Report != nil && !o.Report.OK()) }

// Corpus returns every scenario.
func Corpus() []Scenario {
	return []Scenario{
		{Name: "dead-lease-campaign", Ref: "etcd#11007", Run: deadLeaseCampaign},
		{Name: "expiry-without-fencing", Ref: "Jepsen etcd 3.4.3 lost updates", Run: expiryWithoutFencing},
		{Name: "stale-owner-untouched-key", Ref: "ownership without Fencers", Run: staleOwnerUntouchedKey},
		{Name: "ring-collision", Ref: "buraksezer/consistent name+index collision and panic", Run: ringCollision},
		{Name: "watch-after-compaction", Ref: "naive watch resume after compaction", Run: watchAfterCompaction},
	}
}

const (
	clusterName = "corpus"
	dataPrefix  = "data/"
)

// candidate is a tenure election candidate with its fenced store.
type candidate struct {
	id    string
	cli   *memetcd.Client
	sess  *election.Session
	el    *election.Election
	store *etcdfence.Store
}

func (e *env) candidate(ctx context.Context, id string) (*candidate, error) {
	c := &candidate{id: id, cli: e.client()}
	var err error
	c.store, err = etcdfence.New(c.cli, etcdfence.Config{Cluster: clusterName, Prefix: dataPrefix})
	if err != nil {
		return nil, err
	}
	c.sess, err = election.NewSession(ctx, c.cli, election.SessionConfig{TTL: ttl, Clock: e.fc})
	if err != nil {
		return nil, err
	}
	c.el, err = election.NewElection(c.sess, c.cli, c.cli, election.ElectionConfig{Cluster: clusterName, Name: "k", ID: id,
		Fencers: []fence.Fencer{c.store}})
	return c, err
}

func (c *candidate) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.sess.Close(ctx)
}

// fencedRead reads key's counter through store under t.
func (e *env) fencedRead(store *etcdfence.Store, t fence.Token, key string) (int64, error) {
	ctx, cancel := clock.WithTimeout(context.Background(), e.fc, ttl)
	defer cancel()
	it, err := store.Get(ctx, t, key)
	if err != nil {
		return 0, err
	}
	n, _ := strconv.ParseInt(string(it.Value), 10, 64)
	return n, nil
}

// fencedIncr writes read+1 at key through store under t and records the
// attempt by writer.
func (e *env) fencedIncr(writer string, store *etcdfence.Store, t fence.Token, key string, read int64) error {
	id := e.rec.InvokeWrite(check.Write{Key: key, Scope: t.Scope, Epoch: t.Epoch, Writer: writer, Invoke: e.now(),
		Read: strconv.FormatInt(read, 10), HasRead: true, Value: strconv.FormatInt(read+1, 10)})
	ctx, cancel := clock.WithTimeout(context.Background(), e.fc, ttl)
	defer cancel()
	_, err := store.Put(ctx, t, key, []byte(strconv.FormatInt(read+1, 10)))
	switch {
	case err == nil:
		e.rec.ReturnWrite(id, check.Accepted, e.now())
	case errors.Is(err, fence.ErrStale):
		e.rec.ReturnWrite(id, check.Rejected, e.now())
	default:
		return fmt.Errorf("write by %s: %w", writer, err)
	}
	return nil
}

// finalFenced reads the final values of keys from etcd.
func (e *env) finalFenced(keys ...string) map[string]string {
	admin := e.client()
	out := map[string]string{}
	for _, k := range keys {
		resp, err := admin.Get(context.Background(), dataPrefix+k)
		if err == nil && len(resp.Kvs) > 0 {
			out[k] = string(resp.Kvs[0].Value)
		}
	}
	return out
}
