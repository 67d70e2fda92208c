package memetcd

import (
	"bytes"
	"math"
	"sort"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// This file is etcd v3.7's apply path (server/etcdserver/txn and
// api/v3rpc/key.go) over the in-memory store. Every function runs with the
// Server's lock held.

// mkEnd maps a request's range end to the store's: nil for one key, empty
// for "to the end of the keyspace" ("\x00" on the wire).
func mkEnd(end []byte) []byte {
	if len(end) == 0 {
		return nil
	}
	if len(end) == 1 && end[0] == 0 {
		return []byte{}
	}
	return end
}

func (s *Server) rangeLocked(r *pb.RangeRequest, curRev int64) (*pb.RangeResponse, error) {
	st := s.st
	rev := r.Revision
	if rev > curRev {
		return nil, rpctypes.ErrGRPCFutureRev
	}
	if rev <= 0 {
		rev = curRev
	}
	if rev < st.compactRev {
		return nil, rpctypes.ErrGRPCCompacted
	}
	kvs := st.rangeKVs(r.Key, mkEnd(r.RangeEnd), rev)
	resp := &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: curRev}, Count: int64(len(kvs))}
	if r.CountOnly {
		return resp, nil
	}
	if limit := rangeLimit(r); limit > 0 && int64(len(kvs)) > limit {
		kvs = kvs[:limit]
	}
	fastKeys := r.KeysOnly && r.SortTarget != pb.RangeRequest_VALUE
	out := make([]*mvccpb.KeyValue, len(kvs))
	for i, kv := range kvs {
		if fastKeys {
			out[i] = &mvccpb.KeyValue{Key: bytes.Clone(kv.Key), ModRevision: kv.ModRevision, CreateRevision: kv.CreateRevision, Version: kv.Version}
		} else {
			out[i] = cloneKV(kv)
		}
	}
	out = filterKVs(out, r)
	sortKVs(out, r)
	if r.Limit > 0 && int64(len(out)) > r.Limit {
		out = out[:r.Limit]
		resp.More = true
	}
	if r.KeysOnly {
		for _, kv := range out {
			kv.Value = nil
		}
	}
	resp.Kvs = out
	return resp, nil
}

func isDefaultOrdering(t pb.RangeRequest_SortTarget, o pb.RangeRequest_SortOrder) bool {
	return o == pb.RangeRequest_NONE || (t == pb.RangeRequest_KEY && o == pb.RangeRequest_ASCEND)
}

func hasRevisionFilters(r *pb.RangeRequest) bool {
	return r.MinModRevision != 0 || r.MaxModRevision != 0 || r.MinCreateRevision != 0 || r.MaxCreateRevision != 0
}

func rangeLimit(r *pb.RangeRequest) int64 {
	limit := r.Limit
	if !isDefaultOrdering(r.SortTarget, r.SortOrder) || hasRevisionFilters(r) {
		limit = 0
	}
	if limit > 0 && limit < math.MaxInt64 {
		limit++
	}
	return limit
}

func filterKVs(kvs []*mvccpb.KeyValue, r *pb.RangeRequest) []*mvccpb.KeyValue {
	keep := func(kv *mvccpb.KeyValue) bool {
		return (r.MaxModRevision == 0 || kv.ModRevision <= r.MaxModRevision) &&
			(r.MinModRevision == 0 || kv.ModRevision >= r.MinModRevision) &&
			(r.MaxCreateRevision == 0 || kv.CreateRevision <= r.MaxCreateRevision) &&
			(r.MinCreateRevision == 0 || kv.CreateRevision >= r.MinCreateRevision)
	}
	out := kvs[:0]
	for _, kv := range kvs {
		if keep(kv) {
			out = append(out, kv)
		}
	}
	return out
}

// sortKVs sorts as etcd does, with the same (unstable) sort.Sort on the
// same input order, so that ties come out in the same order.
func sortKVs(kvs []*mvccpb.KeyValue, r *pb.RangeRequest) {
	order := r.SortOrder
	if r.SortTarget != pb.RangeRequest_KEY && order == pb.RangeRequest_NONE {
		order = pb.RangeRequest_ASCEND
	}
	if isDefaultOrdering(r.SortTarget, order) {
		return
	}
	var less func(a, b *mvccpb.KeyValue) bool
	switch r.SortTarget {
	case pb.RangeRequest_KEY:
		less = func(a, b *mvccpb.KeyValue) bool { return bytes.Compare(a.Key, b.Key) < 0 }
	case pb.RangeRequest_VERSION:
		less = func(a, b *mvccpb.KeyValue) bool { return a.Version-b.Version < 0 }
	case pb.RangeRequest_CREATE:
		less = func(a, b *mvccpb.KeyValue) bool { return a.CreateRevision-b.CreateRevision < 0 }
	case pb.RangeRequest_MOD:
		less = func(a, b *mvccpb.KeyValue) bool { return a.ModRevision-b.ModRevision < 0 }
	case pb.RangeRequest_VALUE:
		less = func(a, b *mvccpb.KeyValue) bool { return bytes.Compare(a.Value, b.Value) < 0 }
	default:
		return
	}
	var sorter sort.Interface = kvSorter{kvs, less}
	switch order {
	case pb.RangeRequest_ASCEND:
		sort.Sort(sorter)
	case pb.RangeRequest_DESCEND:
		sort.Sort(sort.Reverse(sorter))
	}
}

type kvSorter struct {
	kvs  []*mvccpb.KeyValue
	less func(a, b *mvccpb.KeyValue) bool
}

func (s kvSorter) Len() int           { return len(s.kvs) }
func (s kvSorter) Swap(i, j int)      { s.kvs[i], s.kvs[j] = s.kvs[j], s.kvs[i] }
func (s kvSorter) Less(i, j int) bool { return s.less(s.kvs[i], s.kvs[j]) }

func checkRangeRequest(r *pb.RangeRequest) error {
	if len(r.Key) == 0 {
		return rpctypes.ErrGRPCEmptyKey
	}
	if _, ok := pb.RangeRequest_SortOrder_name[int32(r.SortOrder)]; !ok {
		return rpctypes.ErrGRPCInvalidSortOption
	}
	if _, ok := pb.RangeRequest_SortTarget_name[int32(r.SortTarget)]; !ok {
		return rpctypes.ErrGRPCInvalidSortOption
	}
	return nil
}

func checkPutRequest(r *pb.PutRequest) error {
	switch {
	case len(r.Key) == 0:
		return rpctypes.ErrGRPCEmptyKey
	case r.IgnoreValue && len(r.Value) != 0:
		return rpctypes.ErrGRPCValueProvided
	case r.IgnoreLease && r.Lease != 0:
		return rpctypes.ErrGRPCLeaseProvided
	}
	return nil
}

func checkDeleteRequest(r *pb.DeleteRangeRequest) error {
	if len(r.Key) == 0 {
		return rpctypes.ErrGRPCEmptyKey
	}
	return nil
}

func checkTxnRequest(r *pb.TxnRequest, maxTxnOps int) error {
	opc := max(len(r.Compare), len(r.Success), len(r.Failure))
	if opc > maxTxnOps {
		return rpctypes.ErrGRPCTooManyOps
	}
	for _, c := range r.Compare {
		if len(c.Key) == 0 {
			return rpctypes.ErrGRPCEmptyKey
		}
	}
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, u := range ops {
			if err := checkRequestOp(u, maxTxnOps-opc); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkRequestOp(u *pb.RequestOp, maxTxnOps int) error {
	switch uv := u.Request.(type) {
	case *pb.RequestOp_RequestRange:
		return checkRangeRequest(uv.RequestRange)
	case *pb.RequestOp_RequestPut:
		return checkPutRequest(uv.RequestPut)
	case *pb.RequestOp_RequestDeleteRange:
		return checkDeleteRequest(uv.RequestDeleteRange)
	case *pb.RequestOp_RequestTxn:
		return checkTxnRequest(uv.RequestTxn, maxTxnOps)
	default:
		return rpctypes.ErrGRPCKeyNotFound
	}
}

// interval is a key interval [begin, end) in etcd's affine order, where
// the empty string is +infinity (adt.StringAffineComparable).
type interval struct{ begin, end string }

func affine(a, b string) int {
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	}
	return strings.Compare(a, b)
}

// overlaps is adt.Interval.Compare(...) == 0.
func (iv interval) overlaps(o interval) bool {
	if affine(iv.begin, o.begin) < 0 && affine(iv.end, o.begin) <= 0 {
		return false
	}
	return affine(iv.begin, o.end) < 0
}

func intersectsKey(dels []interval, k string) bool {
	p := interval{k, k + "\x00"}
	for _, d := range dels {
		if d.overlaps(p) {
			return true
		}
	}
	return false
}

// checkIntervals refuses puts and deletes of the same key in one
// transaction (etcd's ErrGRPCDuplicateKey), as etcd's v3rpc does.
func checkIntervals(reqs []*pb.RequestOp) (map[string]struct{}, []interval, error) {
	var dels []interval
	for _, req := range reqs {
		tv, ok := req.Request.(*pb.RequestOp_RequestDeleteRange)
		if !ok || tv.RequestDeleteRange == nil {
			continue
		}
		d := tv.RequestDeleteRange
		if len(d.RangeEnd) != 0 {
			dels = append(dels, interval{string(d.Key), string(d.RangeEnd)})
		} else {
			dels = append(dels, interval{string(d.Key), string(d.Key) + "\x00"})
		}
	}
	puts := make(map[string]struct{})
	for _, req := range reqs {
		tv, ok := req.Request.(*pb.RequestOp_RequestTxn)
		if !ok {
			continue
		}
		putsThen, delsThen, err := checkIntervals(tv.RequestTxn.Success)
		if err != nil {
			return nil, dels, err
		}
		putsElse, delsElse, err := checkIntervals(tv.RequestTxn.Failure)
		if err != nil {
			return nil, dels, err
		}
		for k := range putsThen {
			if _, ok := puts[k]; ok || intersectsKey(dels, k) {
				return nil, dels, rpctypes.ErrGRPCDuplicateKey
			}
			puts[k] = struct{}{}
		}
		for k := range putsElse {
			if _, ok := puts[k]; ok {
				if _, safe := putsThen[k]; !safe {
					return nil, dels, rpctypes.ErrGRPCDuplicateKey
				}
			}
			if intersectsKey(dels, k) {
				return nil, dels, rpctypes.ErrGRPCDuplicateKey
			}
			puts[k] = struct{}{}
		}
		dels = append(dels, delsThen...)
		dels = append(dels, delsElse...)
	}
	for _, req := range reqs {
		tv, ok := req.Request.(*pb.RequestOp_RequestPut)
		if !ok || tv.RequestPut == nil {
			continue
		}
		k := string(tv.RequestPut.Key)
		if _, ok := puts[k]; ok || intersectsKey(dels, k) {
			return nil, dels, rpctypes.ErrGRPCDuplicateKey
		}
		puts[k] = struct{}{}
	}
	return puts, dels, nil
}

// checkPut verifies a put against the state before the write: its lease
// exists, and a key exists for IgnoreValue or IgnoreLease.
func (s *Server) checkPut(p *pb.PutRequest) error {
	if p.Lease != 0 {
		if _, ok := s.leases[p.Lease]; !ok {
			return rpctypes.ErrGRPCLeaseNotFound
		}
	}
	if (p.IgnoreValue || p.IgnoreLease) && s.st.latest(string(p.Key)) == nil {
		return rpctypes.ErrGRPCKeyNotFound
	}
	return nil
}

// checkRangeRev verifies a range's revision against the state before the
// write.
func (s *Server) checkRangeRev(r *pb.RangeRequest) error {
	switch {
	case r.Revision == 0:
		return nil
	case r.Revision > s.st.rev:
		return rpctypes.ErrGRPCFutureRev
	case r.Revision < s.st.compactRev:
		return rpctypes.ErrGRPCCompacted
	}
	return nil
}

func (s *Server) putLocked(p *pb.PutRequest) *pb.PutResponse {
	st := s.st
	resp := &pb.PutResponse{Header: &pb.ResponseHeader{}}
	val, lease := p.Value, p.Lease
	if p.IgnoreValue || p.IgnoreLease || p.PrevKv {
		prev := st.latest(string(p.Key))
		if p.IgnoreValue {
			val = prev.Value
		}
		if p.IgnoreLease {
			lease = prev.Lease
		}
		if p.PrevKv && prev != nil {
			resp.PrevKv = cloneKV(prev)
		}
	}
	_, old := st.put(p.Key, val, lease)
	if old != lease {
		s.detach(old, string(p.Key))
		s.attach(lease, string(p.Key))
	}
	resp.Header.Revision = st.rev + 1
	return resp
}

func (s *Server) deleteLocked(d *pb.DeleteRangeRequest) *pb.DeleteRangeResponse {
	st := s.st
	resp := &pb.DeleteRangeResponse{Header: &pb.ResponseHeader{}}
	kvs := st.rangeKVs(d.Key, mkEnd(d.RangeEnd), st.readRev())
	if d.PrevKv {
		resp.PrevKvs = make([]*mvccpb.KeyValue, len(kvs))
		for i, kv := range kvs {
			resp.PrevKvs[i] = cloneKV(kv)
		}
	}
	for _, kv := range kvs {
		s.detach(st.del(string(kv.Key)), string(kv.Key))
	}
	resp.Deleted = int64(len(kvs))
	resp.Header.Revision = st.readRev()
	return resp
}

func (s *Server) txnLocked(rt *pb.TxnRequest) (*pb.TxnResponse, error) {
	if err := checkTxnRequest(rt, s.cfg.MaxTxnOps); err != nil {
		return nil, err
	}
	if _, _, err := checkIntervals(rt.Success); err != nil {
		return nil, err
	}
	if _, _, err := checkIntervals(rt.Failure); err != nil {
		return nil, err
	}
	path := s.compareToPath(rt)
	if _, err := s.checkTxn(rt, path); err != nil {
		return nil, err
	}
	resp, _ := newTxnResp(rt, path)
	s.executeTxn(rt, path, resp)
	resp.Header.Revision = s.st.readRev()
	return resp, nil
}

func (s *Server) compareToPath(rt *pb.TxnRequest) []bool {
	path := []bool{s.applyCompares(rt.Compare)}
	ops := rt.Success
	if !path[0] {
		ops = rt.Failure
	}
	for _, op := range ops {
		if tv, ok := op.Request.(*pb.RequestOp_RequestTxn); ok && tv.RequestTxn != nil {
			path = append(path, s.compareToPath(tv.RequestTxn)...)
		}
	}
	return path
}

func (s *Server) applyCompares(cmps []*pb.Compare) bool {
	for _, c := range cmps {
		if !s.applyCompare(c) {
			return false
		}
	}
	return true
}

func (s *Server) applyCompare(c *pb.Compare) bool {
	kvs := s.st.rangeKVs(c.Key, mkEnd(c.RangeEnd), s.st.rev)
	if len(kvs) == 0 {
		if c.Target == pb.Compare_VALUE {
			return false
		}
		return compareKV(c, &mvccpb.KeyValue{})
	}
	for _, kv := range kvs {
		if !compareKV(c, kv) {
			return false
		}
	}
	return true
}

func compareKV(c *pb.Compare, kv *mvccpb.KeyValue) bool {
	var result int
	switch c.Target {
	case pb.Compare_VALUE:
		result = bytes.Compare(kv.Value, c.GetValue())
	case pb.Compare_CREATE:
		result = cmpInt(kv.CreateRevision, c.GetCreateRevision())
	case pb.Compare_MOD:
		result = cmpInt(kv.ModRevision, c.GetModRevision())
	case pb.Compare_VERSION:
		result = cmpInt(kv.Version, c.GetVersion())
	case pb.Compare_LEASE:
		result = cmpInt(kv.Lease, c.GetLease())
	}
	switch c.Result {
	case pb.Compare_EQUAL:
		return result == 0
	case pb.Compare_NOT_EQUAL:
		return result != 0
	case pb.Compare_GREATER:
		return result > 0
	case pb.Compare_LESS:
		return result < 0
	}
	return true
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *Server) checkTxn(rt *pb.TxnRequest, path []bool) (int, error) {
	n := 0
	reqs := rt.Success
	if !path[0] {
		reqs = rt.Failure
	}
	for _, req := range reqs {
		var err error
		switch tv := req.Request.(type) {
		case *pb.RequestOp_RequestRange:
			err = s.checkRangeRev(tv.RequestRange)
		case *pb.RequestOp_RequestPut:
			err = s.checkPut(tv.RequestPut)
		case *pb.RequestOp_RequestTxn:
			var txns int
			txns, err = s.checkTxn(tv.RequestTxn, path[1:])
			n += txns + 1
			path = path[txns+1:]
		}
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

func newTxnResp(rt *pb.TxnRequest, path []bool) (*pb.TxnResponse, int) {
	reqs := rt.Success
	if !path[0] {
		reqs = rt.Failure
	}
	resps := make([]*pb.ResponseOp, len(reqs))
	resp := &pb.TxnResponse{Responses: resps, Succeeded: path[0], Header: &pb.ResponseHeader{}}
	n := 0
	for i, req := range reqs {
		switch tv := req.Request.(type) {
		case *pb.RequestOp_RequestRange:
			resps[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{}}
		case *pb.RequestOp_RequestPut:
			resps[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{}}
		case *pb.RequestOp_RequestDeleteRange:
			resps[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{}}
		case *pb.RequestOp_RequestTxn:
			r, txns := newTxnResp(tv.RequestTxn, path[1:])
			resps[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: r}}
			path = path[1+txns:]
			n += txns + 1
		}
	}
	return resp, n
}

func (s *Server) executeTxn(rt *pb.TxnRequest, path []bool, tresp *pb.TxnResponse) int {
	reqs := rt.Success
	if !path[0] {
		reqs = rt.Failure
	}
	n := 0
	for i, req := range reqs {
		respi := tresp.Responses[i].Response
		switch tv := req.Request.(type) {
		case *pb.RequestOp_RequestRange:
			r, err := s.rangeLocked(tv.RequestRange, s.st.readRev())
			if err != nil { // checked before; cannot happen
				r = &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: s.st.readRev()}}
			}
			respi.(*pb.ResponseOp_ResponseRange).ResponseRange = r
		case *pb.RequestOp_RequestPut:
			respi.(*pb.ResponseOp_ResponsePut).ResponsePut = s.putLocked(tv.RequestPut)
		case *pb.RequestOp_RequestDeleteRange:
			respi.(*pb.ResponseOp_ResponseDeleteRange).ResponseDeleteRange = s.deleteLocked(tv.RequestDeleteRange)
		case *pb.RequestOp_RequestTxn:
			r := respi.(*pb.ResponseOp_ResponseTxn).ResponseTxn
			txns := s.executeTxn(tv.RequestTxn, path[1:], r)
			n += txns + 1
			path = path[txns+1:]
		}
	}
	return n
}

func (s *Server) compactLocked(rev int64) (*pb.CompactionResponse, error) {
	if rev <= s.st.compactRev {
		return nil, rpctypes.ErrGRPCCompacted
	}
	if rev > s.st.rev {
		return nil, rpctypes.ErrGRPCFutureRev
	}
	s.st.compact(rev)
	return &pb.CompactionResponse{Header: &pb.ResponseHeader{Revision: s.st.rev}}, nil
}
