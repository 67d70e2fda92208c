package follow

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/fleet"
)

func TestMain(m *testing.M) { testsupport.VerifyTestMain(m) }

func route(owner string, epoch int64) fleet.Route {
	return fleet.Route{Partition: 3, Owner: owner, Addr: owner + ":1", Epoch: epoch}
}

// TestChoose: a hint steers the next attempt only when it names a newer
// claim of the same partition, or when the view cannot be used (no
// address, or the address that just failed); never back to the address
// that failed.
func TestChoose(t *testing.T) {
	a, b := route("a", 10), route("b", 11)
	assert.Equal(t, a, Choose(a, fleet.Route{}, ""), "no hint")
	assert.Equal(t, b, Choose(a, b, ""), "a newer claim")
	assert.Equal(t, a, Choose(a, route("b", 9), ""), "an older claim")
	assert.Equal(t, a, Choose(a, route("b", 0), ""), "a next owner while the view names a claim")
	assert.Equal(t, route("b", 0), Choose(a, route("b", 0), "a:1"), "a next owner when the view names the address that failed")
	assert.Equal(t, route("b", 0), Choose(fleet.Route{Partition: 3}, route("b", 0), ""), "a next owner when the view has no address")
	assert.Equal(t, a, Choose(a, b, "b:1"), "never the address that failed")
	other := b
	other.Partition = 4
	assert.Equal(t, a, Choose(a, other, ""), "another partition")
	noAddr := b
	noAddr.Addr = ""
	assert.Equal(t, a, Choose(a, noAddr, ""), "no address")
}

// TestProgressBoundsImmediateRetries: a call retries at once only on news
// of its partition: a claim newer than any it has seen, or once, the
// next owner of an ended claim. Hints that repeat, go back in epochs or
// name another partition wait the backoff, so that refusals that keep
// pointing at each other cannot make a call spin.
func TestProgressBoundsImmediateRetries(t *testing.T) {
	a := route("a", 10)
	var g Progress
	assert.False(t, g.News(a, fleet.Route{}), "no hint")
	assert.False(t, g.News(a, route("a", 10)), "the claim tried")
	assert.False(t, g.News(a, route("b", 9)), "an older claim")
	assert.False(t, g.News(a, fleet.Route{Partition: 4, Owner: "b", Addr: "b:1", Epoch: 99}), "another partition")
	assert.False(t, g.News(a, fleet.Route{Partition: 3, Owner: "b", Epoch: 99}), "no address")
	assert.True(t, g.News(a, route("b", 0)), "the next owner of the ended claim")
	assert.False(t, g.News(a, route("c", 0)), "a next owner again")
	b := fleet.Route{Partition: 3, Owner: "b", Addr: "b:1"}
	assert.True(t, g.News(b, route("c", 11)), "a newer claim")
	assert.False(t, g.News(b, route("c", 11)), "the same claim again")
	assert.False(t, g.News(route("c", 11), route("b", 10)), "back to an older claim")
	assert.True(t, g.News(b, route("d", 12)), "newer again")
}

// TestBound: the attempt bound of router.Client and grpcroute.Client
// defaults to half the fleet's TTL, the TTL to the nodes' default; a TTL
// the nodes would refuse is refused; a negative AttemptTimeout is no
// bound and is kept.
func TestBound(t *testing.T) {
	assert.Equal(t, Bound{SessionTTL: election.DefaultTTL, AttemptTimeout: election.DefaultTTL / 2}, Bound{}.WithDefaults())
	assert.Equal(t, Bound{SessionTTL: 2 * time.Second, AttemptTimeout: time.Second}, Bound{SessionTTL: 2 * time.Second}.WithDefaults())
	assert.Equal(t, Bound{SessionTTL: 2 * time.Second, AttemptTimeout: -1}, Bound{SessionTTL: 2 * time.Second, AttemptTimeout: -1}.WithDefaults())
	assert.Equal(t, Bound{SessionTTL: election.DefaultTTL, AttemptTimeout: 3 * time.Second}, Bound{AttemptTimeout: 3 * time.Second}.WithDefaults())
	for _, b := range []Bound{{}, {SessionTTL: election.MinTTL}, {AttemptTimeout: -1}, {AttemptTimeout: time.Millisecond}} {
		assert.NoError(t, b.Validate(), "%+v", b)
	}
	for _, b := range []Bound{{SessionTTL: time.Second}, {SessionTTL: -time.Second}} {
		assert.ErrorContains(t, b.Validate(), "must be at least 2s", "%+v", b)
	}

	errAttemptTimeout := errors.New("attempt timeout")
	err := fmt.Errorf("last attempt: %w", &AttemptTimeoutError{Err: errAttemptTimeout, Client: "grpcroute", Addr: "10.0.0.1:7000", Bound: Bound{}.WithDefaults()})
	assert.ErrorIs(t, err, errAttemptTimeout)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.EqualError(t, err, "last attempt: grpcroute: 10.0.0.1:7000 did not answer within 5s (AttemptTimeout; the fleet's session TTL is 10s)")
}
