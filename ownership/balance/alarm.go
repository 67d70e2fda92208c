package balance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/ownership/fleet"
)

// While an alarm stands in etcd (NOSPACE: its database is full), etcd
// refuses every put, and so every pass with a move. The balancer pauses:
// Plan lists the alarms when its client can (Planned.Alarms), Apply writes
// nothing while any stands (errAlarm, result "alarm"), and Run logs
// "balancer paused: an etcd alarm stands; no pass is applied until it is
// disarmed" (Warn, alarms, once per pause) and, at the first pass planned
// without an alarm that is not refused for one, "balancer resumed: no etcd
// alarm stands" (paused: how long). A balancer whose client cannot list
// alarms learns of NOSPACE from its refused passes only.

// alarms lists the alarms that stand in etcd, nil if the balancer's
// client cannot list them.
func (b *Balancer) alarms(ctx context.Context) ([]fleet.EtcdAlarm, error) {
	as, listed, err := etcderr.Alarms(ctx, b.list)
	if err != nil {
		return nil, fmt.Errorf("balance: list etcd's alarms: %w", err)
	}
	if !listed || len(as) == 0 {
		return nil, nil
	}
	out := make([]fleet.EtcdAlarm, len(as))
	for i, a := range as {
		out[i] = fleet.EtcdAlarm(a)
	}
	return out, nil
}

// alarmErr is Apply's error for a pass planned while alarms stood.
func alarmErr(as []fleet.EtcdAlarm) error {
	names := make([]string, len(as))
	noSpace := false
	for i, a := range as {
		names[i] = a.Alarm + " (member " + a.Member + ")"
		noSpace = noSpace || a.Alarm == "NOSPACE"
	}
	if noSpace {
		return fmt.Errorf("%w: %s: %w", errAlarm, strings.Join(names, ", "), fleet.ErrNoSpace)
	}
	return fmt.Errorf("%w: %s", errAlarm, strings.Join(names, ", "))
}

// refused counts and returns the error of a pass planned at rev whose
// writes etcd refused with err: an alarm's (errAlarm, wrapping
// fleet.ErrNoSpace) if etcd refused them for NOSPACE.
func (b *Balancer) refused(rev int64, err error) error {
	if etcderr.NoSpace(err) {
		b.metrics.pass("alarm")
		return fmt.Errorf("%w: etcd refused the pass at revision %d: %w: %w", errAlarm, rev, fleet.ErrNoSpace, err)
	}
	b.metrics.pass("error")
	return fmt.Errorf("balance: apply pass at revision %d: %w", rev, err)
}

// pause is the state of a leading balancer's pause for an alarm.
type pause struct {
	on    bool
	since time.Time
}

// paused follows a pass's outcome: a pass refused for an alarm starts a
// pause (logged once), and the first pass after it that was planned
// without an alarm and not refused for one ends it.
func (b *Balancer) paused(p *pause, pl *Planned, err error) {
	switch {
	case errors.Is(err, errAlarm):
		if p.on {
			return
		}
		p.on, p.since = true, b.cfg.Clock.Now()
		alarms := "refused for NOSPACE"
		if pl != nil && len(pl.Alarms) > 0 {
			alarms = alarmNames(pl.Alarms)
		}
		b.cfg.Logger.Warn("balancer paused: an etcd alarm stands; no pass is applied until it is disarmed", "alarms", alarms, "error", err)
	case p.on && pl != nil && len(pl.Alarms) == 0 && (err == nil || errors.Is(err, ErrStaleSnapshot) || errors.Is(err, ErrSuspended)):
		p.on = false
		b.cfg.Logger.Info("balancer resumed: no etcd alarm stands", "paused", b.cfg.Clock.Now().Sub(p.since))
	}
}

// alarmNames returns the alarms' names, joined.
func alarmNames(as []fleet.EtcdAlarm) string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.Alarm
	}
	return strings.Join(names, ",")
}
