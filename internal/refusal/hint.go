package refusal

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/router/grpcroute/tenurepb"
)

// Hint is the route of a refused request's partition as the refusing node
// sees it: where the request goes instead. HTTP carries it as the JSON
// "hint" object of the refusal (these field names), gRPC as the
// tenurepb.Refusal fields of the same names. Absent fields are unknown.
type Hint struct {
	Partition   int    `json:"partition"`
	Owner       string `json:"owner,omitempty"`
	Addr        string `json:"addr,omitempty"`
	Epoch       int64  `json:"epoch,omitempty"`
	RingVersion uint64 `json:"ring_version,omitempty"`
	// Acquiring names the refusing node itself as Owner, finishing
	// acquiring the partition: come back shortly.
	Acquiring bool `json:"acquiring,omitempty"`
}

// Refusal is one refusal as a node gives it, before a wire encodes it
// (package router as an httpfence.Refusal, package grpcroute as a status
// with the Proto detail).
type Refusal struct {
	Kind    Kind
	Message string
	// Hint is the route the refusal tells, nil for none.
	Hint *Hint
	// Scope, Presented and Current describe a stale token (Row.Token).
	Scope              string
	Presented, Current int64
}

// New returns the refusal of kind k by node self, for a request whose
// partition the node sees along route (nil: it knows none):
//
//   - its hint, for a kind that carries a route: route, except that it
//     never names self, so that a refusal never sends the caller back to
//     the node that refused, unless self is finishing acquiring the
//     partition in a handoff (Acquiring: come back shortly);
//   - its message: prefix (the wire's package, "router", "grpcroute"),
//     ": " and cause, or, when cause is empty, words for the kind and
//     the hint.
func New(prefix string, k Kind, self string, route *Hint, cause string) Refusal {
	r := Refusal{Kind: k}
	if row, _ := Lookup(k); row.Route != NoRoute && route != nil {
		h := *route
		if h.Owner == self && !(k == Handoff && h.Acquiring) {
			h.Owner, h.Addr, h.Epoch = "", "", 0
		}
		h.Acquiring = h.Acquiring && h.Owner == self && self != ""
		r.Hint = &h
	}
	if cause == "" {
		cause = words(k, r.Hint)
	}
	r.Message = prefix + ": " + cause
	return r
}

// words words a refusal of kind k with hint h by its cause: a node that
// does not own the partition says so and names the owner; a partition
// changing hands names the next owner; one that no node serves is
// unavailable, never "not the owner".
func words(k Kind, h *Hint) string {
	if h == nil {
		return "refused: " + string(k)
	}
	owner := ""
	if h.Owner != "" {
		owner = " " + strconv.Quote(h.Owner)
		if h.Addr != "" {
			owner += " at " + h.Addr
		}
		if h.Epoch != 0 {
			owner += " epoch " + strconv.FormatInt(h.Epoch, 10)
		}
	}
	row, _ := Lookup(k)
	switch {
	case k == Handoff && h.Acquiring:
		return fmt.Sprintf("partition %d is changing owner: this node%s is acquiring it", h.Partition, owner)
	case k == Handoff && owner != "":
		return fmt.Sprintf("partition %d is changing owner: next owner%s", h.Partition, owner)
	case owner == "" && row.Route == Answer:
		return fmt.Sprintf("unavailable: no node serves partition %d yet (%s)", h.Partition, k)
	case owner == "":
		return fmt.Sprintf("refused: %s (partition %d)", k, h.Partition)
	case k == NotOwner:
		return fmt.Sprintf("not the owner of partition %d: owner%s", h.Partition, owner)
	}
	return fmt.Sprintf("%s: partition %d, next owner%s", k, h.Partition, owner)
}

// SetToken describes in r the stale token of err, when r's kind carries
// one (Row.Token) and err holds a valid *fence.StaleError.
func (r *Refusal) SetToken(err error) {
	var se *fence.StaleError
	if row, _ := Lookup(r.Kind); !row.Token || !errors.As(err, &se) {
		return
	}
	if fence.ValidateScope(se.Scope) == nil && se.Presented > 0 && se.Current >= 0 {
		r.Scope, r.Presented, r.Current = se.Scope, se.Presented, se.Current
	}
}

// JSON returns r's hint as the HTTP wire's "hint" object, nil for none.
func (r Refusal) JSON() json.RawMessage {
	if r.Hint == nil {
		return nil
	}
	raw, _ := json.Marshal(r.Hint) // a struct of strings and numbers always encodes
	return raw
}

// Proto returns r as the gRPC wire's detail, nil if r's kind has no gRPC
// form.
func (r Refusal) Proto() *tenurepb.Refusal {
	row, ok := Lookup(r.Kind)
	if !ok || row.Proto == tenurepb.Refusal_KIND_UNSPECIFIED {
		return nil
	}
	p := &tenurepb.Refusal{Kind: row.Proto, Retryable: row.Retryable,
		Scope: r.Scope, Presented: r.Presented, Current: r.Current}
	if h := r.Hint; h != nil {
		p.Partition = uint32(min(max(h.Partition, 0), math.MaxInt32))
		p.Owner, p.Addr, p.Epoch, p.RingVersion, p.Acquiring = h.Owner, h.Addr, h.Epoch, h.RingVersion, h.Acquiring
	}
	return p
}

// validate reports whether h can be a route: no negative number.
func (h *Hint) validate() error {
	if h.Partition < 0 || h.Epoch < 0 {
		return fmt.Errorf("hint: negative number (partition %d, epoch %d)", h.Partition, h.Epoch)
	}
	return nil
}

// Take returns the hint a client takes from a refusal of kind k that told
// h (nil: none): nil for a kind that carries no route (or that this
// version does not know), or for advice that names no owner; h itself
// (the zero Hint for nil) for an answer. A hint with a negative partition
// or epoch is no route: an error. A hint is advice from the network: the
// client still chooses where to go (router/internal/follow).
func Take(k Kind, h *Hint) (*Hint, error) {
	row, _ := Lookup(k)
	if row.Route == NoRoute {
		return nil, nil
	}
	if h == nil {
		h = &Hint{}
	}
	if err := h.validate(); err != nil {
		return nil, err
	}
	if row.Route == Advice && h.Owner == "" {
		return nil, nil
	}
	return h, nil
}

// ParseJSON parses the HTTP wire's "hint" object raw: nil if raw is
// empty, an error if raw is not a route's (not its JSON shape, a negative
// partition or epoch).
func ParseJSON(raw []byte) (*Hint, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var h Hint
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("hint: %w", err)
	}
	if err := h.validate(); err != nil {
		return nil, err
	}
	return &h, nil
}

// DecodeJSON returns what a client takes (Take) from the HTTP "hint"
// object raw of a refusal of kind k; the hint of a kind that carries no
// route is not read.
func DecodeJSON(k Kind, raw []byte) (*Hint, error) {
	if row, _ := Lookup(k); row.Route == NoRoute {
		return nil, nil
	}
	h, err := ParseJSON(raw)
	if err != nil {
		return nil, err
	}
	return Take(k, h)
}

// FromProto returns the row of the gRPC refusal p and what a client takes
// (Take) from its hint fields: the zero Row (not retryable) if p is nil or
// of a kind this version does not know. A hint that is not a route is an
// error.
func FromProto(p *tenurepb.Refusal) (Row, *Hint, error) {
	row, ok := ByProto(p.GetKind())
	if !ok {
		return Row{}, nil, nil
	}
	if p.Partition > math.MaxInt32 {
		return row, nil, fmt.Errorf("hint: partition %d out of range", p.Partition)
	}
	h, err := Take(row.Kind, &Hint{Partition: int(p.Partition), Owner: p.Owner, Addr: p.Addr, Epoch: p.Epoch,
		RingVersion: p.RingVersion, Acquiring: p.Acquiring})
	return row, h, err
}
