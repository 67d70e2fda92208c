package memetcd

import (
	"context"
	"errors"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/internal/clock"
)

// leaseAPI is a Client's clientv3.Lease (but Close, which is the
// Client's). It converts responses and errors as the etcd client's lessor
// does; KeepAlive runs on the server's clock.
type leaseAPI struct{ c *Client }

// firstKeepAliveTimeout is how long KeepAlive waits for the first
// response before it gives up the lease, as the etcd client's default.
const firstKeepAliveTimeout = 5 * time.Second

// Grant implements clientv3.Lease.
func (l leaseAPI) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	resp, err := unary(ctx, l.c, kindWrite, func(s *Server) (*pb.LeaseGrantResponse, error) {
		r, err := s.grantLocked(ttl)
		if err != nil {
			return nil, err
		}
		s.fill(r.Header)
		return r, nil
	})
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	return &clientv3.LeaseGrantResponse{ResponseHeader: resp.GetHeader(), ID: clientv3.LeaseID(resp.ID), TTL: resp.TTL, Error: resp.Error}, nil
}

// Revoke implements clientv3.Lease.
func (l leaseAPI) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	resp, err := unary(ctx, l.c, kindWrite, func(s *Server) (*pb.LeaseRevokeResponse, error) {
		le := s.leases[int64(id)]
		if le == nil {
			return nil, rpctypes.ErrGRPCLeaseNotFound
		}
		s.revokeLocked(le)
		s.scheduleLocked()
		r := &pb.LeaseRevokeResponse{Header: &pb.ResponseHeader{}}
		s.fill(r.Header)
		return r, nil
	})
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	return (*clientv3.LeaseRevokeResponse)(resp), nil
}

// TimeToLive implements clientv3.Lease. The remaining TTL is truncated to
// whole seconds, as etcd does; a lease etcd does not have has TTL -1.
func (l leaseAPI) TimeToLive(ctx context.Context, id clientv3.LeaseID, opts ...clientv3.LeaseOption) (*clientv3.LeaseTimeToLiveResponse, error) {
	var op clientv3.LeaseOp
	for _, o := range opts {
		o(&op)
	}
	withKeys := op != clientv3.LeaseOp{} // WithAttachedKeys is the only option
	resp, err := unary(ctx, l.c, kindRead, func(s *Server) (*pb.LeaseTimeToLiveResponse, error) {
		r := &pb.LeaseTimeToLiveResponse{Header: &pb.ResponseHeader{}, ID: int64(id), TTL: -1}
		if le := s.leases[int64(id)]; le != nil {
			r.TTL = int64(le.expiry.Sub(s.clock.Now()).Seconds())
			r.GrantedTTL = le.ttl
			if withKeys {
				for _, k := range sortedKeys(le.keys) {
					r.Keys = append(r.Keys, []byte(k))
				}
			}
		}
		s.fill(r.Header)
		return r, nil
	})
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	return &clientv3.LeaseTimeToLiveResponse{ResponseHeader: resp.GetHeader(), ID: clientv3.LeaseID(resp.ID), TTL: resp.TTL, GrantedTTL: resp.GrantedTTL, Keys: resp.Keys}, nil
}

// Leases implements clientv3.Lease: the leases in order of expiry (then
// ID).
func (l leaseAPI) Leases(ctx context.Context) (*clientv3.LeaseLeasesResponse, error) {
	resp, err := unary(ctx, l.c, kindRead, func(s *Server) (*pb.LeaseLeasesResponse, error) {
		r := &pb.LeaseLeasesResponse{Header: s.header(s.st.rev)}
		for _, le := range s.sortedLeases() {
			r.Leases = append(r.Leases, &pb.LeaseStatus{ID: le.id})
		}
		return r, nil
	})
	if err != nil {
		return nil, clientv3.ContextError(ctx, err)
	}
	out := &clientv3.LeaseLeasesResponse{ResponseHeader: resp.GetHeader(), Leases: make([]clientv3.LeaseStatus, len(resp.Leases))}
	for i, ls := range resp.Leases {
		out.Leases[i] = clientv3.LeaseStatus{ID: clientv3.LeaseID(ls.ID)}
	}
	return out, nil
}

// renew is one keep-alive round trip: the renewed TTL, or 0 if the lease
// is gone.
func (l leaseAPI) renew(ctx context.Context, id clientv3.LeaseID) (*pb.LeaseKeepAliveResponse, error) {
	return unary(ctx, l.c, kindKeepAlive, func(s *Server) (*pb.LeaseKeepAliveResponse, error) {
		r := &pb.LeaseKeepAliveResponse{Header: &pb.ResponseHeader{}, ID: int64(id)}
		s.fill(r.Header)
		if le := s.leases[int64(id)]; le != nil {
			s.refresh(le, 0)
			s.scheduleLocked()
			r.TTL = le.ttl
		}
		return r, nil
	})
}

// KeepAliveOnce implements clientv3.Lease. Like the etcd client, it
// retries errors that mean "try again" (gRPC Unavailable or Internal).
func (l leaseAPI) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	for {
		resp, err := l.renew(ctx, id)
		if err == nil {
			if resp.TTL <= 0 {
				return nil, rpctypes.ErrLeaseNotFound
			}
			return &clientv3.LeaseKeepAliveResponse{ResponseHeader: resp.GetHeader(), ID: clientv3.LeaseID(resp.ID), TTL: resp.TTL}, nil
		}
		if ctx.Err() != nil || !retryable(err) {
			return nil, clientv3.ContextError(ctx, err)
		}
	}
}

func retryable(err error) bool {
	c := status.Code(err)
	return c == codes.Unavailable || c == codes.Internal
}

// KeepAlive implements clientv3.Lease on the server's clock: it renews
// the lease at once and then every TTL/3 (retrying every 500ms after a
// failure), and delivers every response on the channel (dropping it if the
// channel is full, as the etcd client does). The channel is closed when
// ctx ends, the client is closed, the lease is gone, or no renewal was
// acknowledged for a TTL (5s before the first).
func (l leaseAPI) KeepAlive(ctx context.Context, id clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	ch := make(chan *clientv3.LeaseKeepAliveResponse, clientv3.LeaseResponseChSize)
	c := l.c
	if c.ctx.Err() != nil {
		close(ch)
		return ch, clientv3.ErrKeepAliveHalted{Reason: errors.New("memetcd: client closed")}
	}
	go l.keepAliveLoop(ctx, id, ch)
	return ch, nil
}

func (l leaseAPI) keepAliveLoop(ctx context.Context, id clientv3.LeaseID, ch chan<- *clientv3.LeaseKeepAliveResponse) {
	defer close(ch)
	c := l.c
	clk := c.s.clock
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	deadline := clk.Now().Add(firstKeepAliveTimeout)
	for ctx.Err() == nil {
		rctx, rcancel := clock.WithTimeout(ctx, clk, deadline.Sub(clk.Now()))
		resp, err := l.renew(rctx, id)
		rcancel()
		wait := 500 * time.Millisecond
		switch {
		case err == nil && resp.TTL <= 0:
			return
		case err == nil:
			deadline = clk.Now().Add(time.Duration(resp.TTL) * time.Second)
			select {
			case ch <- &clientv3.LeaseKeepAliveResponse{ResponseHeader: resp.GetHeader(), ID: clientv3.LeaseID(resp.ID), TTL: resp.TTL}:
			default:
			}
			wait = max(time.Duration(resp.TTL)*time.Second/3, 500*time.Millisecond)
		case !clk.Now().Before(deadline):
			return
		}
		if !clock.Sleep(ctx, clk, wait) {
			return
		}
	}
}

func sortedKeys(m map[string]struct{}) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
