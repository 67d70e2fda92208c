package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
)

// closeTimeout bounds closing a session (revoking its lease) on the way out.
const closeTimeout = 5 * time.Second

// status is what /readyz reports. It is safe for concurrent use.
type status struct {
	mu    sync.Mutex
	ready bool
	role  string
}

func (s *status) set(ready bool, role string) {
	s.mu.Lock()
	s.ready, s.role = ready, role
	s.mu.Unlock()
}

func (s *status) get() (ready bool, role string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.role == "" {
		return s.ready, "starting"
	}
	return s.ready, s.role
}

// candidate is one process in the job's election.
type candidate struct {
	cli     *clientv3.Client
	cluster string
	id      string
	addr    string // published with the candidacy
	ttl     time.Duration
	fencer  fence.Fencer
	job     *job
	status  *status
	log     hclog.Logger
	metrics *metrics
}

// run holds a session and runs the job's election on it until ctx is done;
// a session that ends (the lease expired while the process was paused, or
// etcd was out of reach for too long) is replaced by a new one. When ctx is
// done it resigns (the next candidate takes over at once), revokes the
// lease and returns nil.
func (c *candidate) run(ctx context.Context) error {
	const first, most = 100 * time.Millisecond, 5 * time.Second
	delay := first
	for ctx.Err() == nil {
		began := time.Now()
		err := c.session(ctx)
		if ctx.Err() != nil {
			break
		}
		if time.Since(began) > c.ttl {
			delay = first // a session that lived is no failure streak
		}
		c.log.Warn("no etcd session; starting a new one", "error", err, "in", delay)
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
		case <-timer.C:
		}
		delay = min(2*delay, most)
	}
	return nil
}

// session runs the election on one session, and returns why it ended.
func (c *candidate) session(ctx context.Context) error {
	s, err := election.NewSession(ctx, c.cli, election.SessionConfig{TTL: c.ttl, Logger: c.log.Named("session")})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		if err := s.Close(cctx); err != nil && !errors.Is(err, election.ErrSessionDone) {
			c.log.Warn("close session", "error", err)
		}
	}()
	e, err := election.NewElection(s, c.cli, c.cli, election.ElectionConfig{
		Cluster: c.cluster,
		Name:    c.job.ledger.job,
		ID:      c.id,
		Value:   c.addr,
		Fencers: []fence.Fencer{c.fencer},
		Hooks: &election.Hooks{
			OnElected: func(_ context.Context, t fence.Token) {
				c.metrics.terms.Inc()
				c.metrics.isLeader.Set(1)
				c.status.set(true, fmt.Sprintf("leader, epoch %d", t.Epoch))
				c.log.Info("elected", "epoch", t.Epoch, "scope", t.Scope)
			},
			OnEnded: func(t fence.Token, reason error) {
				c.metrics.isLeader.Set(0)
				c.status.set(s.Err() == nil, "follower")
				c.log.Info("term ended", "epoch", t.Epoch, "reason", reason)
			},
		},
		Logger: c.log.Named("election"),
	})
	if err != nil {
		return err
	}
	c.status.set(true, "follower")
	defer c.status.set(false, "no etcd session")
	c.log.Debug("campaigning", "lease", fmt.Sprintf("%x", int64(s.Lease())))
	return e.Run(ctx, c.job.lead)
}
