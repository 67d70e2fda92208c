package router

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tenure-go/tenure/fleet"
	"github.com/tenure-go/tenure/ownership"
)

// TestProgressBoundsImmediateRetries: a call retries at once only on news
// of its partition: a claim newer than any it has seen, or once, the
// next owner of an ended claim. Hints that repeat, go back in epochs or
// name another partition wait the backoff, so that refusals that keep
// pointing at each other cannot make a call spin.
func TestProgressBoundsImmediateRetries(t *testing.T) {
	a := fleet.Route{Partition: 3, Owner: "a", Addr: "a:1", Epoch: 10}
	hint := func(owner string, epoch int64) *ownership.WrongOwnerError {
		return &ownership.WrongOwnerError{Route: fleet.Route{Partition: 3, Owner: owner, Addr: owner + ":1", Epoch: epoch}}
	}
	var g progress
	assert.False(t, g.newHint(a, nil), "no hint")
	assert.False(t, g.newHint(a, hint("a", 10)), "the claim tried")
	assert.False(t, g.newHint(a, hint("b", 9)), "an older claim")
	assert.False(t, g.newHint(a, &ownership.WrongOwnerError{Route: fleet.Route{Partition: 4, Owner: "b", Addr: "b:1", Epoch: 99}}), "another partition")
	assert.False(t, g.newHint(a, &ownership.WrongOwnerError{Route: fleet.Route{Partition: 3, Owner: "b", Epoch: 99}}), "no address")
	assert.True(t, g.newHint(a, hint("b", 0)), "the next owner of the ended claim")
	assert.False(t, g.newHint(a, hint("c", 0)), "a next owner again")
	b := fleet.Route{Partition: 3, Owner: "b", Addr: "b:1"}
	assert.True(t, g.newHint(b, hint("c", 11)), "a newer claim")
	assert.False(t, g.newHint(b, hint("c", 11)), "the same claim again")
	assert.False(t, g.newHint(fleet.Route{Partition: 3, Owner: "c", Addr: "c:1", Epoch: 11}, hint("b", 10)), "back to an older claim")
	assert.True(t, g.newHint(b, hint("d", 12)), "newer again")
}
