package grpcroute

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Stream is the Client's grpc.StreamClientInterceptor. A streaming call
// takes its key from WithKey or the MetadataKey metadata (a call without
// one fails with codes.InvalidArgument), carries the same metadata as a
// unary call, and is retried as a unary call is until the first response
// message arrives: the messages sent so far are kept and sent again, in
// order, on the new attempt (with CloseSend if the caller had closed). Once
// a response message has arrived, errors are returned as they come. An
// attempt is cut off and retried when its node has not started answering
// within the ClientConfig's AttemptTimeout of the caller's wait, as its
// documentation describes; once the node has answered (its header, a
// message or its status), the stream is never cut off.
func (c *Client) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	ctx, rt, err := c.prepare(ctx, method, nil)
	if err != nil {
		c.failed.Add(1)
		return nil, err
	}
	s := &retryStream{c: c, ctx: c.withTrace(ctx), rt: rt, desc: desc, cc: cc, method: method, streamer: streamer}
	s.opts = opts
	s.attempt = 1
	c.attempts.Add(1)
	if s.cur, s.att, err = s.open(); err != nil {
		// The stream could not start: retry as a failed attempt.
		if s.cur, s.att, err = s.retry(err); err != nil {
			c.record(s.attempt, err)
			return nil, err
		}
	}
	return s, nil
}

// retryStream is a client stream that starts again on a new attempt
// after a retryable failure, until its first response message.
type retryStream struct {
	c        *Client
	ctx      context.Context
	rt       *route
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption

	mu       sync.Mutex // guards what follows; held across a restart's replay
	cur      grpc.ClientStream
	att      *attempt // cur's bound; nil without one
	attempt  int
	sent     []any // messages sent so far, until a response arrives
	closed   bool  // CloseSend was called
	received bool  // a response message arrived: no more retries
	done     bool  // the call's outcome was recorded
}

// current returns the current attempt's stream and bound.
func (s *retryStream) current() (grpc.ClientStream, *attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.att
}

func (s *retryStream) stream() grpc.ClientStream {
	cs, _ := s.current()
	return cs
}

func (s *retryStream) Context() context.Context { return s.stream().Context() }
func (s *retryStream) Trailer() metadata.MD     { return s.stream().Trailer() }

// Header waits for the current attempt's header, counted as a wait for
// its answer, which the header (or the stream's end) is.
func (s *retryStream) Header() (metadata.MD, error) {
	cs, a := s.current()
	a.enter()
	md, err := cs.Header()
	a.answer()
	a.leave(false)
	return md, err
}

// SendMsg sends m on the current attempt and keeps a copy for a retry.
// An attempt that has failed takes the message silently: the failure is
// read by RecvMsg, which retries.
func (s *retryStream) SendMsg(m any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.received {
		if pm, ok := m.(proto.Message); ok {
			s.sent = append(s.sent, proto.Clone(pm))
		} else {
			s.sent = append(s.sent, m)
		}
	}
	s.att.enter()
	err := s.cur.SendMsg(m)
	s.att.leave(err == nil)
	if errors.Is(err, io.EOF) && !s.received {
		return nil
	}
	return err
}

// CloseSend closes the sending side of the current attempt, and of the
// attempts after it.
func (s *retryStream) CloseSend() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	err := s.cur.CloseSend()
	s.att.progress()
	return err
}

// RecvMsg receives the next response; before the first one, a retryable
// failure, or an attempt cut off by AttemptTimeout, starts the call again
// on a new attempt.
func (s *retryStream) RecvMsg(m any) error {
	for {
		cur, a := s.current()
		a.enter()
		err := cur.RecvMsg(m)
		if err == nil {
			a.answer()
		}
		a.leave(false)
		s.mu.Lock()
		switch {
		case err == nil:
			s.received, s.sent = true, nil
			s.mu.Unlock()
			if !s.desc.ServerStreams {
				s.finish(nil)
			}
			return nil
		case errors.Is(err, io.EOF):
			s.mu.Unlock()
			s.finish(nil)
			return err
		case cur != s.cur:
			s.mu.Unlock()
			continue // another goroutine restarted the call
		}
		err = a.end(s.ctx, s.rt.tried().Addr, err)
		if s.received {
			s.mu.Unlock()
			s.finish(err)
			return err
		}
		next, na, rerr := s.retry(err)
		if rerr != nil {
			s.mu.Unlock()
			s.finish(rerr)
			return rerr
		}
		s.cur, s.att = next, na
		s.mu.Unlock()
	}
}

// open starts an attempt of the call: its stream, and its bound, whose
// clock the balancer starts when it sends the attempt to a node, and
// which a goroutine marks answered when the stream's header comes.
func (s *retryStream) open() (grpc.ClientStream, *attempt, error) {
	a := s.c.newAttempt(s.ctx)
	s.rt.attempt.Store(a)
	cs, err := s.streamer(a.context(s.ctx), s.desc, s.cc, s.method, s.opts...)
	if err != nil {
		return nil, nil, a.end(s.ctx, s.rt.tried().Addr, err)
	}
	if a != nil {
		go a.watchHeader(cs)
	}
	return cs, a, nil
}

// retry starts the next attempt of the call after the failure err, and
// sends it what the caller sent so far, or returns the error that ends
// the call. s.mu is held (or s is not shared yet).
func (s *retryStream) retry(err error) (grpc.ClientStream, *attempt, error) {
	for {
		if !s.c.again(s.ctx, s.rt, err) {
			return nil, nil, err
		}
		if werr := s.c.wait(s.ctx, s.method, s.rt, s.attempt, err); werr != nil {
			return nil, nil, werr
		}
		s.attempt++
		s.c.attempts.Add(1)
		next, a, serr := s.open()
		if serr != nil {
			err = serr
			continue
		}
		if serr = s.replay(next, a); serr != nil && !errors.Is(serr, io.EOF) {
			err = a.end(s.ctx, s.rt.tried().Addr, serr)
			continue
		}
		return next, a, nil
	}
}

// replay sends the new attempt cs, bounded by a, the messages the caller
// sent so far, and closes its sending side if the caller had.
func (s *retryStream) replay(cs grpc.ClientStream, a *attempt) error {
	for _, m := range s.sent {
		a.enter()
		err := cs.SendMsg(m)
		a.leave(err == nil)
		if err != nil {
			return err
		}
	}
	if !s.closed {
		return nil
	}
	err := cs.CloseSend()
	a.progress()
	return err
}

// finish records the call's outcome once, and releases its last
// attempt.
func (s *retryStream) finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.done = true
	_ = s.att.end(s.ctx, "", nil)
	s.c.record(s.attempt, err)
}
