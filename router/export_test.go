package router

import (
	"encoding/json"
	"fmt"

	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/internal/refusal"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router/internal/admit"
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

// hintOf returns the hint a refusal of kind by node self tells of we, as
// hintRefusal writes it.
func hintOf(kind httpfence.RefusalKind, self string, we *ownership.WrongOwnerError) *refusal.Hint {
	return refusal.New("router", refusal.Kind(kind), self, admit.HintOf(we), "").Hint
}

// decodeHint returns the wrong-owner error of a refusal's "hint" object
// raw, whatever the refusal's kind: the zero one if raw is empty.
func decodeHint(raw []byte) (*ownership.WrongOwnerError, error) {
	h, err := refusal.ParseJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", httpfence.ErrInvalidRefusal, err)
	}
	if h == nil {
		h = &refusal.Hint{}
	}
	return wrongOwner(h), nil
}
