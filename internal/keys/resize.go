package keys

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A resize of the partition count keeps its state under the claim prefix,
// so that every reader receives it on the one watch that carries the
// claims, in revision order with them:
//
//	<prefix>claims/resize/<id>/record     JSON Resize: the resize in progress
//	<prefix>claims/resize/<id>/moving/<s> the driver asks group s to move
//	<prefix>claims/resize/<id>/done/<s>   group s follows the target count
//	<prefix>claims/resize/<id>/back/<s>   group s moved back to the starting
//	                                      count (an aborted resize)
//	<prefix>claims/resize/<id>/fenced/<s> the partitions group s replaced in
//	                                      its last change are retired at
//	                                      every fencer
//
// A claim key's partition is a canonical decimal, so no reader takes these
// keys for claims. The record is created in the transaction that writes
// the resize into the spec and deleted in the one that writes the spec's
// new partition count.

// Resizes returns the prefix of every resize's keys.
func (l Layout) Resizes() string { return l.claims + "resize/" }

// ResizeRecord returns the key of resize id's record.
func (l Layout) ResizeRecord(id string) string { return l.Resizes() + id + "/record" }

// ResizeKeys returns the prefix of resize id's keys.
func (l Layout) ResizeKeys(id string) string { return l.Resizes() + id + "/" }

// ResizeMoving returns the key that asks group s of resize id to move.
func (l Layout) ResizeMoving(id string, s int) string {
	return l.Resizes() + id + "/moving/" + strconv.Itoa(s)
}

// ResizeDone returns the key that says group s of resize id is done.
func (l Layout) ResizeDone(id string, s int) string {
	return l.Resizes() + id + "/done/" + strconv.Itoa(s)
}

// ResizeBack returns the key that says group s of resize id moved back
// to the starting count.
func (l Layout) ResizeBack(id string, s int) string {
	return l.Resizes() + id + "/back/" + strconv.Itoa(s)
}

// ResizeFenced returns the key that says the partitions group s of resize
// id replaced in its last change are retired at every fencer.
func (l Layout) ResizeFenced(id string, s int) string {
	return l.Resizes() + id + "/fenced/" + strconv.Itoa(s)
}

// ResizeKey is a parsed resize key.
type ResizeKey struct {
	ID     string
	Record bool // the record (else Moving, Back, Fenced or a done key)
	Moving bool // a moving key
	Back   bool // a back key
	Fenced bool // a fenced key
	Group  int
}

// ParseResize parses a resize key; ok is false for any other key.
func (l Layout) ParseResize(key string) (ResizeKey, bool) {
	rest, ok := strings.CutPrefix(key, l.Resizes())
	if !ok {
		return ResizeKey{}, false
	}
	id, rest, ok := strings.Cut(rest, "/")
	if !ok || id == "" {
		return ResizeKey{}, false
	}
	if rest == "record" {
		return ResizeKey{ID: id, Record: true}, true
	}
	kind, num, ok := strings.Cut(rest, "/")
	if !ok || (kind != "moving" && kind != "done" && kind != "back" && kind != "fenced") {
		return ResizeKey{}, false
	}
	s, ok := canonicalPartition(num)
	if !ok {
		return ResizeKey{}, false
	}
	return ResizeKey{ID: id, Moving: kind == "moving", Back: kind == "back", Fenced: kind == "fenced", Group: s}, true
}

// Resize is a resize of the partition count in progress, as the spec and
// its record store it.
type Resize struct {
	// ID names the resize; its keys live under ResizeKeys(ID).
	ID string `json:"id"`
	// From is the partition count before, To the one after.
	From int `json:"from"`
	To   int `json:"to"`
	// Aborting says that the resize returns to From: done groups move
	// back (their back keys), and it ends with the spec at From.
	Aborting bool `json:"aborting,omitempty"`
	// By, Reason and Started say who started it, why and when (the
	// driver's clock).
	By      string    `json:"by,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	Budget  int       `json:"budget"`
	Started time.Time `json:"started"`
}

// Small returns the number of groups, min(From, To).
func (r Resize) Small() int { return min(r.From, r.To) }

// Check reports whether r is a usable resize: an ID, counts in [1, max]
// that differ by a power of two, a positive budget.
func (r Resize) Check(maxPartitions int) error {
	switch {
	case r.ID == "" || strings.ContainsAny(r.ID, "/\x00"):
		return fmt.Errorf("resize id %q must be non-empty without '/' or NUL", r.ID)
	case r.From < 1 || r.To < 1 || r.From > maxPartitions || r.To > maxPartitions:
		return fmt.Errorf("resize %d -> %d: counts must be in [1, %d]", r.From, r.To, maxPartitions)
	case r.From == r.To:
		return fmt.Errorf("resize %d -> %d: the counts are equal", r.From, r.To)
	case !PowerOfTwoApart(r.From, r.To):
		return fmt.Errorf("resize %d -> %d: one count must be the other times a power of two", r.From, r.To)
	case r.Budget < 1:
		return fmt.Errorf("resize budget %d must be >= 1", r.Budget)
	}
	return nil
}

// PowerOfTwoApart reports whether the larger of a and b (both positive) is
// the smaller times a power of two.
func PowerOfTwoApart(a, b int) bool {
	lo, hi := min(a, b), max(a, b)
	if hi%lo != 0 {
		return false
	}
	q := hi / lo
	return q&(q-1) == 0
}

// EncodeResize returns the JSON value of r.
func EncodeResize(r Resize) string {
	b, _ := json.Marshal(r) // cannot fail: strings, integers and a time
	return string(b)
}

// DecodeResize parses a resize record and checks it (Check).
func DecodeResize(v []byte, maxPartitions int) (Resize, error) {
	var r Resize
	if err := json.Unmarshal(v, &r); err != nil {
		return Resize{}, err
	}
	if err := r.Check(maxPartitions); err != nil {
		return Resize{}, err
	}
	return r, nil
}
