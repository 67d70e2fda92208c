package memetcd

import (
	"bytes"
	"context"
	"io"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

type (
	grpcCallOption  = grpc.CallOption
	grpcRangeStream = grpc.ServerStreamingClient[pb.RangeStreamResponse]
)

// watchRemote is the etcdserverpb.WatchClient that a Client's
// clientv3.Watcher talks to: every Watch call opens one in-memory stream.
type watchRemote struct{ c *Client }

var _ pb.WatchClient = watchRemote{}

func (r watchRemote) Watch(ctx context.Context, _ ...grpc.CallOption) (grpc.BidiStreamingClient[pb.WatchRequest, pb.WatchResponse], error) {
	c := r.c
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.closed {
		return nil, rpcClosing
	}
	ws := &watchStream{s: s, c: c, ctx: ctx, watchers: make(map[int64]*watcher), signal: make(chan struct{}, 1)}
	if requiresLeader(ctx) {
		ws.requireLeader = true
		if s.leaderless {
			return nil, rpcNoLeader
		}
	}
	s.streams = append(s.streams, ws)
	c.streams = append(c.streams, ws)
	context.AfterFunc(ctx, ws.remove)
	return ws, nil
}

// watchStream is the server end of one watch stream and the client end's
// transport at once. Its state is guarded by the Server's lock.
type watchStream struct {
	s             *Server
	c             *Client
	ctx           context.Context
	requireLeader bool

	watchers map[int64]*watcher
	order    []*watcher // by ID
	nextID   int64
	held     []*pb.WatchRequest // sent while partitioned
	out      []*pb.WatchResponse
	err      error // ends the stream once out is drained
	signal   chan struct{}
}

type watcher struct {
	id           int64
	key, end     []byte // end nil: one key; empty: to the end
	startRev     int64  // as requested
	minRev       int64  // next revision to deliver
	prevKV       bool
	noPut, noDel bool
}

func (w *watcher) matches(key []byte) bool {
	if w.end == nil {
		return bytes.Equal(key, w.key)
	}
	return bytes.Compare(key, w.key) >= 0 && (len(w.end) == 0 || bytes.Compare(key, w.end) < 0)
}

// remove detaches the stream from the server when its context ends.
func (ws *watchStream) remove() {
	ws.s.mu.Lock()
	defer ws.s.mu.Unlock()
	ws.detachLocked()
}

func (ws *watchStream) poke() {
	select {
	case ws.signal <- struct{}{}:
	default:
	}
}

func (ws *watchStream) sendLocked(r *pb.WatchResponse) {
	ws.out = append(ws.out, r)
	ws.poke()
}

// failLocked ends the stream with err (once its queued responses are
// received) and detaches it from the server.
func (ws *watchStream) failLocked(err error) {
	if ws.err == nil {
		ws.err = err
		ws.poke()
	}
	ws.detachLocked()
}

func (ws *watchStream) detachLocked() {
	s := ws.s
	s.streams = slices.DeleteFunc(s.streams, func(x *watchStream) bool { return x == ws })
	ws.c.streams = slices.DeleteFunc(ws.c.streams, func(x *watchStream) bool { return x == ws })
}

// Send implements the client stream: the server handles the request at
// once, or at Heal if the client is partitioned.
func (ws *watchStream) Send(req *pb.WatchRequest) error {
	s := ws.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if ws.ctx.Err() != nil || ws.err != nil {
		// A broken stream answers nothing more: a request sent on it
		// after it broke (a progress request among them) is lost with
		// the connection, as on a real one.
		return io.EOF
	}
	if ws.c.partitioned {
		ws.held = append(ws.held, req)
		return nil
	}
	s.expireLocked()
	ws.handleLocked(req)
	return nil
}

// flushLocked handles the requests held during a partition.
func (ws *watchStream) flushLocked() {
	held := ws.held
	ws.held = nil
	for _, req := range held {
		ws.handleLocked(req)
	}
	ws.poke()
}

func (ws *watchStream) handleLocked(req *pb.WatchRequest) {
	s := ws.s
	switch uv := req.RequestUnion.(type) {
	case *pb.WatchRequest_CreateRequest:
		if uv.CreateRequest != nil {
			ws.createLocked(uv.CreateRequest)
		}
	case *pb.WatchRequest_CancelRequest:
		if uv.CancelRequest == nil {
			return
		}
		id := uv.CancelRequest.WatchId
		if _, ok := ws.watchers[id]; ok {
			ws.dropLocked(id)
			ws.sendLocked(&pb.WatchResponse{Header: s.header(s.st.rev), WatchId: id, Canceled: true})
		}
	case *pb.WatchRequest_ProgressRequest:
		if uv.ProgressRequest == nil {
			return
		}
		rev := s.st.rev
		for _, w := range ws.order {
			if rev < w.startRev {
				return
			}
		}
		if len(ws.order) > 0 {
			ws.sendLocked(&pb.WatchResponse{Header: s.header(rev), WatchId: clientv3.InvalidWatchID})
		}
	}
}

func (ws *watchStream) dropLocked(id int64) {
	delete(ws.watchers, id)
	ws.order = slices.DeleteFunc(ws.order, func(w *watcher) bool { return w.id == id })
}

func (ws *watchStream) createLocked(creq *pb.WatchCreateRequest) {
	s := ws.s
	st := s.st
	key := creq.Key
	if len(key) == 0 {
		key = []byte{0}
	}
	if creq.StartRevision < 0 {
		ws.sendLocked(&pb.WatchResponse{Header: s.header(st.rev), WatchId: clientv3.InvalidWatchID, Canceled: true, Created: true, CancelReason: rpctypes.ErrCompacted.Error()})
		return
	}
	if end := mkEnd(creq.RangeEnd); len(end) > 0 && bytes.Compare(key, end) >= 0 {
		ws.sendLocked(&pb.WatchResponse{Header: s.header(st.rev), WatchId: clientv3.InvalidWatchID, Created: true, Canceled: true, CancelReason: errEmptyWatcherRange})
		return
	}
	w := &watcher{id: ws.nextID, key: bytes.Clone(key), end: mkEnd(creq.RangeEnd), startRev: creq.StartRevision, prevKV: creq.PrevKv}
	if w.end != nil {
		w.end = bytes.Clone(w.end)
	}
	for _, f := range creq.Filters {
		switch f {
		case pb.WatchCreateRequest_NOPUT:
			w.noPut = true
		case pb.WatchCreateRequest_NODELETE:
			w.noDel = true
		}
	}
	ws.nextID++
	ws.sendLocked(&pb.WatchResponse{Header: s.header(st.rev), WatchId: w.id, Created: true})
	start := creq.StartRevision
	if start == 0 || start > st.rev {
		w.minRev = max(st.rev+1, start)
		ws.addLocked(w)
		return
	}
	// Catch up from history, in batches of at most watchBatchMaxRevs
	// revisions, as etcd's watcher sync does.
	if start < st.compactRev {
		ws.sendLocked(&pb.WatchResponse{Header: &pb.ResponseHeader{ClusterId: clusterID, MemberId: memberID, RaftTerm: s.term}, WatchId: w.id, CompactRevision: st.compactRev, Canceled: true})
		return
	}
	var batch []*mvccpb.Event
	revs, last := 0, int64(0)
	for _, ev := range st.eventsFrom(start) {
		if !w.matches(ev.Kv.Key) {
			continue
		}
		if rev := ev.Kv.ModRevision; rev != last {
			if revs == watchBatchMaxRevs {
				ws.deliverLocked(w, batch, st.rev)
				batch, revs = nil, 0
			}
			revs++
			last = rev
		}
		batch = append(batch, ev)
	}
	ws.deliverLocked(w, batch, st.rev)
	w.minRev = st.rev + 1
	ws.addLocked(w)
}

func (ws *watchStream) addLocked(w *watcher) {
	ws.watchers[w.id] = w
	ws.order = append(ws.order, w)
}

// notifyLocked delivers the events of one revision.
func (ws *watchStream) notifyLocked(evs []*mvccpb.Event) {
	rev := evs[0].Kv.ModRevision
	for _, w := range ws.order {
		if rev < w.minRev {
			continue
		}
		var mine []*mvccpb.Event
		for _, ev := range evs {
			if w.matches(ev.Kv.Key) {
				mine = append(mine, ev)
			}
		}
		ws.deliverLocked(w, mine, rev)
		w.minRev = rev + 1
	}
}

// deliverLocked queues evs (after w's filters) in one response with header
// revision rev, unless no event is left.
func (ws *watchStream) deliverLocked(w *watcher, evs []*mvccpb.Event, rev int64) {
	st := ws.s.st
	var out []*mvccpb.Event
	for _, ev := range evs {
		if (ev.Type == mvccpb.PUT && w.noPut) || (ev.Type == mvccpb.DELETE && w.noDel) {
			continue
		}
		e := &mvccpb.Event{Type: ev.Type, Kv: cloneKV(ev.Kv)}
		isCreate := ev.Type == mvccpb.PUT && ev.Kv.CreateRevision == ev.Kv.ModRevision
		if w.prevKV && !isCreate {
			if r := ev.Kv.ModRevision - 1; r >= st.compactRev {
				e.PrevKv = cloneKV(st.at(string(ev.Kv.Key), r))
			}
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return
	}
	ws.sendLocked(&pb.WatchResponse{Header: ws.s.header(rev), WatchId: w.id, Events: out})
}

// Recv implements the client stream: the next response, once the client
// is not partitioned.
func (ws *watchStream) Recv() (*pb.WatchResponse, error) {
	s := ws.s
	for {
		s.mu.Lock()
		if !ws.c.partitioned || ws.err != nil {
			if len(ws.out) > 0 && !ws.c.partitioned {
				r := ws.out[0]
				ws.out[0] = nil
				ws.out = ws.out[1:]
				s.countWatchLocked(ws.c, r)
				s.mu.Unlock()
				return wire(r), nil
			}
			if ws.err != nil {
				err := ws.err
				s.mu.Unlock()
				return nil, err
			}
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ws.signal:
		case <-ch:
		case <-ws.ctx.Done():
			return nil, status.FromContextError(ws.ctx.Err()).Err()
		}
	}
}

func (ws *watchStream) Header() (metadata.MD, error) { return metadata.MD{}, nil }
func (ws *watchStream) Trailer() metadata.MD         { return metadata.MD{} }
func (ws *watchStream) CloseSend() error             { return nil }
func (ws *watchStream) Context() context.Context     { return ws.ctx }
func (ws *watchStream) SendMsg(m any) error {
	req, ok := m.(*pb.WatchRequest)
	if !ok {
		return status.Errorf(codes.InvalidArgument, "memetcd: unexpected message %T", m)
	}
	return ws.Send(req)
}

func (ws *watchStream) RecvMsg(m any) error {
	r, err := ws.Recv()
	if err != nil {
		return err
	}
	out, ok := m.(*pb.WatchResponse)
	if !ok {
		return status.Errorf(codes.InvalidArgument, "memetcd: unexpected message %T", m)
	}
	proto.Merge(out, r)
	return nil
}

// rangeStream is a RangeStream answered in one chunk.
type rangeStream struct {
	ctx  context.Context
	resp *pb.RangeStreamResponse
}

func (r *rangeStream) Recv() (*pb.RangeStreamResponse, error) {
	if r.resp == nil {
		return nil, io.EOF
	}
	resp := r.resp
	r.resp = nil
	return resp, nil
}

func (r *rangeStream) Header() (metadata.MD, error) { return metadata.MD{}, nil }
func (r *rangeStream) Trailer() metadata.MD         { return metadata.MD{} }
func (r *rangeStream) CloseSend() error             { return nil }
func (r *rangeStream) Context() context.Context     { return r.ctx }
func (r *rangeStream) SendMsg(any) error            { return nil }
func (r *rangeStream) RecvMsg(m any) error {
	resp, err := r.Recv()
	if err != nil {
		return err
	}
	out, ok := m.(*pb.RangeStreamResponse)
	if !ok {
		return status.Errorf(codes.InvalidArgument, "memetcd: unexpected message %T", m)
	}
	proto.Merge(out, resp)
	return nil
}
