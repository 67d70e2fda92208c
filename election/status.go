package election

import (
	"fmt"
	"time"
)

// Status is a snapshot of an Election, as Election.Status returns it.
type Status struct {
	// Name is the election's name and Candidate this candidate's ID:
	// ElectionConfig.ID, or the session's lease in hexadecimal ("" for an
	// election without a session or ID).
	Name, Candidate string
	// Leader reports whether this candidate holds a term that stands: one
	// that Campaign handed out (its fencers advanced) and that has not
	// ended.
	Leader bool
	// Epoch is the standing term's epoch and Since the instant Campaign
	// handed it out, on the election's clock; both are zero unless Leader.
	Epoch int64
	Since time.Time
	// Campaigning reports a Campaign in progress.
	Campaigning bool
	// Closed reports that Close was called.
	Closed bool
	// Observed is the newest leadership this Election has seen: by Leader,
	// by an Observe stream, or by winning a term itself. Its Revision is 0
	// if it has seen none. It is only as fresh as those calls: keep an
	// Observe stream running to keep it current.
	Observed Observation
	// ObservedAt is when Observed was seen, on the election's clock.
	ObservedAt time.Time
}

// Status returns a snapshot of the Election: whether this candidate leads,
// since when and under which epoch, and the leader it has observed. It
// does not call etcd. It is safe for concurrent use.
func (e *Election) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := Status{
		Name:        e.cfg.Name,
		Candidate:   e.id,
		Campaigning: e.campaigning,
		Closed:      e.closed,
		Observed:    e.observed,
		ObservedAt:  e.observedAt,
	}
	if t := e.term; t != nil && t.live && t.ctx.Err() == nil {
		st.Leader, st.Epoch, st.Since = true, t.token.Epoch, t.since
	}
	return st
}

// observe1 records o as observed unless a newer state was, and logs a
// change of leader.
func (e *Election) observe1(o Observation) {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	if o.Revision < e.observed.Revision {
		e.mu.Unlock()
		return
	}
	prev := e.observed
	e.observed, e.observedAt = o, now
	e.mu.Unlock()
	known := prev.Revision != 0
	if known && prev.Elected == o.Elected && prev.Leader.Epoch == o.Leader.Epoch {
		return // the same leader (perhaps with a new value)
	}
	if !o.Elected {
		e.log.Info("leader observed changed", "leader", "", "revision", o.Revision)
		return
	}
	e.log.Info("leader observed changed", "leader", o.Leader.ID, "leader_epoch", o.Leader.Epoch,
		"leader_lease", fmt.Sprintf("%x", int64(o.Leader.Lease)), "revision", o.Revision)
}
