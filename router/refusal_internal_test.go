package router

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
)

// The router's refusals are worded by their cause: a partition no node
// serves is unavailable, never "not the owner".
func TestRefusalMessages(t *testing.T) {
	for _, tt := range []struct {
		kind httpfence.RefusalKind
		we   ownership.WrongOwnerError
		want string
	}{
		{httpfence.RefusalNotOwner, ownership.WrongOwnerError{Route: fleet.Route{Partition: 3, Owner: "b", Addr: "h:1", Epoch: 7}},
			`router: not the owner of partition 3: owner "b" at h:1 epoch 7`},
		{httpfence.RefusalHandoff, ownership.WrongOwnerError{Route: fleet.Route{Partition: 3, Owner: "b", Addr: "h:1"}, Releasing: true},
			`router: partition 3 is changing owner: next owner "b" at h:1`},
		{httpfence.RefusalHandoff, ownership.WrongOwnerError{Route: fleet.Route{Partition: 3, Owner: "self", Addr: "h:0"}, Acquiring: true},
			`router: partition 3 is changing owner: this node "self" at h:0 is acquiring it`},
		{httpfence.RefusalHandoff, ownership.WrongOwnerError{Route: fleet.Route{Partition: 29}},
			`router: unavailable: no node serves partition 29 yet (handoff)`},
		{httpfence.RefusalHandoff, ownership.WrongOwnerError{Route: fleet.Route{Partition: 29, Owner: "self", Addr: "h:0"}},
			`router: unavailable: no node serves partition 29 yet (handoff)`},
		{httpfence.RefusalSessionLost, ownership.WrongOwnerError{Route: fleet.Route{Partition: 29}},
			`router: unavailable: no node serves partition 29 yet (session-lost)`},
	} {
		ref := hintRefusal(tt.kind, "self", &tt.we, "")
		assert.Equal(t, tt.want, ref.Message)
		assert.Equal(t, tt.kind, ref.Kind)
	}
}

// A hint that is not the router's is an invalid refusal, never a route.
func TestRefusalHintMalformed(t *testing.T) {
	for name, hint := range map[string]string{
		"negative partition": `{"partition":-3}`,
		"negative epoch":     `{"partition":1,"owner":"b","epoch":-1}`,
		"wrong types":        `{"partition":"1"}`,
	} {
		we, err := refusalHint(&httpfence.Refusal{Kind: httpfence.RefusalNotOwner, Hint: json.RawMessage(hint)})
		assert.ErrorIs(t, err, httpfence.ErrInvalidRefusal, name)
		assert.Nil(t, we, name)
	}
	we, err := refusalHint(hintRefusal(httpfence.RefusalSessionLost, "self", &ownership.WrongOwnerError{Route: fleet.Route{Partition: 3, Owner: "b", Addr: "h:1", Epoch: 7, RingVersion: 2}}, ""))
	assert.NoError(t, err)
	assert.Equal(t, &ownership.WrongOwnerError{Route: fleet.Route{Partition: 3, Owner: "b", Addr: "h:1", Epoch: 7, RingVersion: 2}, SessionLost: true}, we)
}
