package router

import (
	"encoding/json"

	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
)

// HintOf decodes the "hint" object of ref, for the tests: the zero hint if
// it has none. It fails the decoding test of a malformed one by returning
// a hint of partition -1.
func HintOf(ref *httpfence.Refusal) ownership.WrongOwnerError {
	we, err := decodeHint(ref.Hint)
	if err != nil {
		return ownership.WrongOwnerError{Route: fleet.Route{Partition: -1}}
	}
	return *we
}

// WithHint sets the "hint" object of ref to route, as a node that is not
// the route's owner writes it, for the tests' fake nodes.
func WithHint(ref *httpfence.Refusal, route fleet.Route) *httpfence.Refusal {
	ref.Hint, _ = json.Marshal(hintOf(ref.Kind, "", &ownership.WrongOwnerError{Route: route}))
	return ref
}

// The headers of a forwarded request, for the tests.
const (
	HeaderForwarded   = headerForwarded
	HeaderRingVersion = headerRingVersion
)

// Revision returns the etcd revision of c's view of the fleet, for the
// tests.
func Revision(c *Client) int64 { return c.obs.Revision() }
