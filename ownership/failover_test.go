package ownership

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/fleetview"
)

// The rules that tell a failover from a planned move, on the orders in
// which the member and claim watches may deliver what etcd wrote. The
// real events are in TestAlertsOnAPause (a pause) and
// TestAlertsSilentThroughRollingRestart (graceful leaves).
func TestFailoverClassification(t *testing.T) {
	const (
		self            = "me"
		myLease         = clientv3.LeaseID(100)
		wLease, wLease2 = clientv3.LeaseID(7), clientv3.LeaseID(8)
		ttl             = 10 * time.Second
	)
	member := func(rev int64, lease clientv3.LeaseID, put bool) fleetview.Event {
		return fleetview.Event{Rev: rev, Member: true, Put: put, ID: "w",
			Rec: fleetview.MemberRec{Member: fleetview.Member{ID: "w", Weight: 1}, Lease: lease, TTL: ttl}}
	}
	claimDel := func(rev int64) fleetview.Event { return fleetview.Event{Rev: rev, P: 0} }
	claimPut := func(rev int64, owner string, lease clientv3.LeaseID) fleetview.Event {
		return fleetview.Event{Rev: rev, P: 0, Put: true, Claim: fleetview.Claim{Owner: owner, Epoch: rev, Lease: lease}}
	}
	listing := func(claim fleetview.Claim, catchUp bool) fleetview.Update {
		lst := &fleetview.Listing{Rev: 50, Members: map[string]fleetview.MemberRec{}, Claims: make([]fleetview.Claim, 4)}
		lst.Claims[0] = claim
		return fleetview.Update{Listing: lst, CatchUp: catchUp}
	}
	cases := []struct {
		name    string
		updates [][]fleetview.Event // after w joined (rev 2) and claimed 0 (rev 3)
		list    *fleetview.Claim    // a listing after the updates
		catchUp bool                // the listing is a catch-up listing
		epoch   int64               // this node's claim of 0
		want    failoverCause
	}{
		{name: "lease ended, claim first", updates: [][]fleetview.Event{{claimDel(10)}, {member(10, wLease, false)}}, epoch: 11, want: causeLeaseEnded},
		{name: "lease ended, member first", updates: [][]fleetview.Event{{member(10, wLease, false)}, {claimDel(10)}}, epoch: 11, want: causeLeaseEnded},
		{name: "graceful leave", updates: [][]fleetview.Event{{member(10, wLease, false)}, {claimDel(12)}}, epoch: 13},
		{name: "planned move", updates: [][]fleetview.Event{{claimDel(10)}}, epoch: 11},
		{name: "rejoined", updates: [][]fleetview.Event{{member(10, wLease2, true)}, {claimDel(12)}}, epoch: 13, want: causeRejoined},
		{name: "rejoined, claim first", updates: [][]fleetview.Event{{claimDel(12)}, {member(10, wLease2, true)}}, epoch: 13, want: causeRejoined},
		{name: "restart after a graceful leave", updates: [][]fleetview.Event{{member(10, wLease, false)}, {claimDel(12)}, {member(14, wLease2, true)}}, epoch: 15},
		{name: "claimed by another since", updates: [][]fleetview.Event{{claimDel(10), member(10, wLease, false)}, {claimPut(11, "x", 9)}}, epoch: 12},
		{name: "claimed since, in a catch-up listing", updates: [][]fleetview.Event{{claimDel(10), member(10, wLease, false)}}, list: &fleetview.Claim{Owner: "x", Epoch: 11, Lease: 9}, catchUp: true, epoch: 12},
		{name: "unclaimed in a catch-up listing", updates: [][]fleetview.Event{{claimDel(10), member(10, wLease, false)}}, list: &fleetview.Claim{}, catchUp: true, epoch: 51, want: causeLeaseEnded},
		// A new generation's listing: x may have claimed 0 and handed it
		// back in the gap before it, as after this node's own pause.
		{name: "unclaimed in a new generation's listing", updates: [][]fleetview.Event{{claimDel(10), member(10, wLease, false)}}, list: &fleetview.Claim{}, epoch: 51},
		{name: "own claim seen before serving", updates: [][]fleetview.Event{{claimDel(10), member(10, wLease, false)}, {claimPut(11, self, myLease)}}, epoch: 11, want: causeLeaseEnded},
		{name: "deleted after this node's claim", updates: [][]fleetview.Event{{claimDel(12), member(12, wLease, false)}}, epoch: 11},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fleetview.NewState(testConfig(t, "classify", self, 4).Ring, hclog.NewNullLogger())
			fo := newFailovers()
			now := time.Unix(1000, 0)
			apply := func(u fleetview.Update) {
				fo.observe(f, u, self, myLease, now)
				f.Apply(u)
			}
			apply(fleetview.Update{Events: []fleetview.Event{member(2, wLease, true)}})
			apply(fleetview.Update{Events: []fleetview.Event{claimPut(3, "w", wLease)}})
			for _, evs := range tc.updates {
				apply(fleetview.Update{Events: evs})
			}
			if tc.list != nil {
				apply(listing(*tc.list, tc.catchUp))
			}
			got := fo.takeover(0, tc.epoch, now.Add(30*time.Millisecond))
			assert.Equal(t, tc.want, got.cause)
			if tc.want == 0 {
				return
			}
			assert.Equal(t, "w", got.holder)
			assert.Equal(t, 30*time.Millisecond, got.takeover)
			if tc.want == causeLeaseEnded {
				assert.Equal(t, ttl+30*time.Millisecond, got.sinceRenewal, "bounded by the TTL")
			} else {
				assert.Zero(t, got.sinceRenewal, "no bound without an expiry")
			}
			assert.Equal(t, failover{}, fo.takeover(0, tc.epoch, now), "told once")
		})
	}
}
