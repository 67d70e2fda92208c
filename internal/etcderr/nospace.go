package etcderr

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// NoSpace reports whether err says that etcd refused a write because its
// database is full: the NOSPACE alarm stands (or the write would raise it).
// Under that alarm etcd takes reads, deletions and lease renewals, but
// refuses every put, every transaction that holds one (in either branch, at
// any depth) and every lease grant, until an operator disarms the alarm.
func NoSpace(err error) bool {
	return errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace)
}
