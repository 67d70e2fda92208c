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
// a response message has arrived, errors are returned as they come.
func (c *Client) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	ctx, rt, err := c.prepare(ctx, method, nil)
	if err != nil {
		c.failed.Add(1)
		return nil, err
	}
	s := &retryStream{c: c, ctx: ctx, rt: rt, desc: desc, cc: cc, method: method, streamer: streamer}
	s.opts = opts
	s.attempt = 1
	c.attempts.Add(1)
	if s.cur, err = streamer(ctx, desc, cc, method, s.opts...); err != nil {
		// The stream could not start: retry as a failed attempt.
		if s.cur, err = s.retry(err); err != nil {
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
	attempt  int
	sent     []any // messages sent so far, until a response arrives
	closed   bool  // CloseSend was called
	received bool  // a response message arrived: no more retries
	done     bool  // the call's outcome was recorded
}

func (s *retryStream) stream() grpc.ClientStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

func (s *retryStream) Context() context.Context { return s.stream().Context() }
func (s *retryStream) Trailer() metadata.MD     { return s.stream().Trailer() }

func (s *retryStream) Header() (metadata.MD, error) { return s.stream().Header() }

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
	err := s.cur.SendMsg(m)
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
	return s.cur.CloseSend()
}

// RecvMsg receives the next response; before the first one, a retryable
// failure starts the call again on a new attempt.
func (s *retryStream) RecvMsg(m any) error {
	for {
		cur := s.stream()
		err := cur.RecvMsg(m)
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
		case s.received || cur != s.cur:
			s.mu.Unlock()
			if cur != s.cur {
				continue // another goroutine restarted the call
			}
			s.finish(err)
			return err
		}
		next, rerr := s.retry(err)
		if rerr != nil {
			s.mu.Unlock()
			s.finish(rerr)
			return rerr
		}
		s.cur = next
		s.mu.Unlock()
	}
}

// retry starts the next attempt of the call after the failure err, and
// sends it what the caller sent so far, or returns the error that ends
// the call. s.mu is held (or s is not shared yet).
func (s *retryStream) retry(err error) (grpc.ClientStream, error) {
	for {
		if !s.c.again(s.ctx, s.rt, err) {
			return nil, err
		}
		if werr := s.c.wait(s.ctx, s.method, s.rt, s.attempt, err); werr != nil {
			return nil, werr
		}
		s.attempt++
		s.c.attempts.Add(1)
		next, serr := s.streamer(s.ctx, s.desc, s.cc, s.method, s.opts...)
		if serr != nil {
			err = serr
			continue
		}
		for _, m := range s.sent {
			if serr = next.SendMsg(m); serr != nil {
				break
			}
		}
		if serr == nil && s.closed {
			serr = next.CloseSend()
		}
		if serr != nil && !errors.Is(serr, io.EOF) {
			err = serr
			continue
		}
		return next, nil
	}
}

// finish records the call's outcome once.
func (s *retryStream) finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.done = true
	s.c.record(s.attempt, err)
}
