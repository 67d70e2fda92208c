package ownership

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/fleetview"
)

// loop is the event loop's state. Only the loop goroutine touches it; the
// partitions' records are in Node.slots, which the loop alone writes
// (transition). The loop's inputs are the fleet's updates and the messages
// of messages.go.
type loop struct {
	n   *Node
	gen *generation

	fleet *fleetview.State

	updates   chan fleetview.Update // from the generation's fleetview.Reader.follow
	stopWatch context.CancelFunc
	resyncing bool // the watch ended; a listing is on its way

	batch         int  // partitions per transaction
	handoverAsked bool // this generation asked the fleet to record the handover feature (handover.go)
	// handed holds, by partition, a claim handed over to this node that
	// its view does not give it (yet): kept for handedGrace (handover.go).
	handed         map[int]handedClaim
	claimsInFlight int
	claimHold      bool
	claimAttempt   int
	pendingDeletes []int
	pendingFences  []*tenure
	acquiredQ      []acquisition // fenced (starting or serving), OnAcquired not yet queued
	earlyQ         []*tenure     // admitted in this step before their OnAcquired returned (starting.go)
	releaseQ       []*tenure     // handed off, drain not yet started
	handoff        *handoff      // the batch of releaseQ

	// The warm handoff (prepare.go, warm.go).
	ready       map[readyKey]int64   // the readiness keys of the fleet, as followReady delivered them
	started     *move                // the prepare phase of the moves away this reconciliation started
	waiting     []waiting            // the partitions of moves away this reconciliation found serving
	prepRunning map[int]*preparation // by partition: the last preparation whose OnPrepare may still run
	readyQ      map[int]int64        // by partition, the epoch to put in this node's readiness key, 0 to delete it (flushReady)
	readyFlying bool                 // a write of readiness keys is in flight
	warm        map[int]time.Time    // by partition being claimed (or to claim again once the shape is known): when it was prepared, if it was

	// vanished are served tenures that ended because their claims
	// disappeared while the session looked alive; memberGone reports the
	// member key deleted or replaced so. Whether the session's lease went
	// with them (a session loss) or someone else deleted them (a forced
	// release, a removed member) is decided once, by classify.
	vanished   []*tenure
	memberGone bool
	checking   bool // a check of the lease is in flight
	checks     int  // failed checks in a row

	// groupsInFlight are the resize groups whose done transaction runs
	// (resize.go).
	groupsInFlight map[int]bool
	movingSeen     map[int]time.Time // by moving group: when this node first saw its moving key
	// shapeWait is a revision this node's view must reach before it
	// claims: a claim found the fleet's shape changed there (awaitShape).
	shapeWait int64
	// shapeRefusals counts claims refused in a row by a shape the view
	// already held (awaitShape); a claim made resets it.
	shapeRefusals int

	closing        bool
	memberDeleting bool
	unregistered   bool   // closing: the member key is deleted
	w              writes // whether etcd takes puts, for planned releases (nospace.go)

	lost  error // set when the generation must end
	dirty bool  // the snapshot is out of date

	// leases are the leases of this node's sessions, the latest
	// maxPastLeases: a member key bound to one of them is this node's own
	// (rejoin.go).
	leases []clientv3.LeaseID
}

func newLoop(n *Node) *loop {
	l := &loop{
		n:     n,
		fleet: fleetview.NewState(n.cfg.Ring, n.log),
		batch: n.cfg.MaxTxnOps - 1,

		ready:       map[readyKey]int64{},
		prepRunning: map[int]*preparation{},
		readyQ:      map[int]int64{},
		warm:        map[int]time.Time{},
		handed:      map[int]handedClaim{},

		groupsInFlight: map[int]bool{},
		movingSeen:     map[int]time.Time{},
	}
	l.fleet.ClaimChanged = l.checkTenure
	return l
}

// install starts serving generation gen from its listing.
func (l *loop) install(gen *generation, lst *fleetview.Listing) {
	l.gen = gen
	l.leases = append(l.leases, gen.lease)
	if len(l.leases) > maxPastLeases {
		l.leases = l.leases[1:]
	}
	l.lost = nil
	l.fleet.Forget()
	l.claimHold, l.claimAttempt, l.resyncing = false, 0, false
	l.w.ok, l.w.used, l.w.checking = false, false, false // a check of the previous generation answers no more
	l.apply(fleetview.Update{Listing: lst})
	l.watch(lst.Rev)
	clear(l.ready)
	clear(l.warm)
	if n := l.n; n.warmEnabled() {
		n.spawn(func() { n.followReady(gen) })
	}
}

// watch follows the fleet after revision rev, on a goroutine of the
// generation.
func (l *loop) watch(rev int64) {
	n, gen := l.n, l.gen
	ctx, cancel := context.WithCancel(gen.ctx)
	updates := make(chan fleetview.Update)
	l.stopWatch, l.updates = cancel, updates
	n.spawn(func() {
		n.reader.Follow(ctx, rev, gen.sess.TTL(), func(u fleetview.Update) bool {
			select {
			case updates <- u:
				return true
			case <-ctx.Done():
				return false
			}
		})
	})
}

// unwatch stops following the fleet.
func (l *loop) unwatch() {
	if l.stopWatch != nil {
		l.stopWatch()
		l.stopWatch = nil
	}
	l.updates = nil
}

// apply folds an update of the fleet into the loop's state.
func (l *loop) apply(u fleetview.Update) {
	if u.Stale {
		l.resyncing = true
		return
	}
	if u.Listing != nil {
		l.resyncing = false
	}
	l.n.report.fleetChanging(l, u)
	l.fleet.Apply(u)
	l.n.slots.grow(len(l.fleet.Claims))
	l.n.load.Grow(len(l.fleet.Claims))
	if me, ok := l.fleet.Members[l.n.id]; !l.closing && (!ok || me.Lease != l.gen.lease) {
		l.memberGone = true
	}
	l.dirty = true
}

// serve handles events until the generation ends. It returns closed=true
// when the node is done (closed or aborted); otherwise err says why the
// generation ended.
func (l *loop) serve() (closed bool, err error) {
	n := l.n
	closeC := n.closeCtx.Done()
	if l.closing {
		closeC = nil
	}
	for {
		l.classify()
		if l.lost != nil {
			return false, l.lost
		}
		if !l.memberGone { // the member key's removal ends the generation once classified
			l.reconcile()
		}
		if l.dirty {
			l.publish()
		}
		l.fireAcquired()
		if l.closing && l.closeDone() {
			return true, l.finishClose()
		}
		select {
		case <-n.rootCtx.Done():
			return true, l.abort()
		case <-closeC:
			closeC = nil
			l.startClose()
		case <-l.gen.sess.Done():
			return false, l.gen.sess.Err()
		case u := <-l.updates:
			l.apply(u)
		case e := <-n.msgs:
			l.handle(e)
		}
		// Take whatever else is ready before reconciling, so that a burst of
		// events costs one reconciliation and one snapshot.
	more:
		for range 512 {
			select {
			case u := <-l.updates:
				l.apply(u)
			case m := <-n.msgs:
				l.handle(m)
			default:
				break more
			}
		}
	}
}
