package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/examples/internal/app"
	"github.com/tenure-go/tenure/examples/internal/counterdb"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/ownership"
)

// schemaTimeout bounds the creation of the SQL store's tables at the start.
const schemaTimeout = 30 * time.Second

// sqlStore keeps the counters in SQL (--db: SQLite or PostgreSQL) with the
// counter example's store (examples/internal/counterdb): each partition's
// counters in the memory of its owner, loaded when the node acquires the
// partition (after its floor in the database was raised to the new
// epoch), and written through in fenced transactions, in groups with
// --group-commit, once per idempotency key. With --prepare, a planned
// move's next owner reads the partition while the holder still serves
// it (ownership's OnPrepare) and catches up after its claim.
type sqlStore struct {
	db      *sql.DB
	dialect sqlfence.Dialect
	fencer  sqlfence.Fencer
	store   *counterdb.Store
	com     *counterdb.Committer
}

// openSQLStore opens the database of cfg.db, creates its tables if they
// are missing, opens its connections (counterdb.WarmPool) and returns the
// store, whose metrics, and the pool's (counterdb.Metrics.WatchPool), are
// m's.
func openSQLStore(ctx context.Context, cfg config, log hclog.Logger, m *counterdb.Metrics) (*sqlStore, error) {
	db, dialect, err := counterdb.Open(cfg.db, cfg.ttl)
	if err != nil {
		return nil, err
	}
	err = m.WatchPool(db)
	var fences *sqlfence.Fences
	if err == nil {
		fences, err = sqlfence.New(sqlfence.Config{Dialect: dialect, Metrics: m.Registry})
	}
	if err == nil {
		err = app.Retry(ctx, schemaTimeout, log, "create schema", func(ctx context.Context) error {
			return counterdb.CreateSchema(ctx, db, dialect, fences)
		})
	}
	if err == nil {
		err = counterdb.WarmPool(ctx, db, dialect)
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	st := counterdb.NewStore(db, dialect, fences, log.Named("store"), m, cfg.prepare)
	com, err := counterdb.NewCommitter(st, cfg.ID, cfg.groupCommit, cfg.maxBatch, 0, log.Named("commit"))
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &sqlStore{db: db, dialect: dialect, fencer: sqlfence.Fencer{DB: db, Fences: fences}, store: st, com: com}, nil
}

// close ends the committer once the increments submitted are committed,
// then closes the database. Call it after the last call was answered.
func (s *sqlStore) close() {
	s.com.Close()
	_ = s.db.Close()
}

// add adds delta to key's counter under token t, once per idempotency key
// id, and returns the counter's value after the call that id names. A call
// without an idempotency key (not sent by grpcroute.Client) gets one of
// its own: it is applied every time it is sent.
func (s *sqlStore) add(ctx context.Context, t fence.Token, key string, delta int64, id string) (int64, error) {
	part, err := s.store.Serve(ctx, t, key)
	if err != nil {
		return 0, callError(ctx, err)
	}
	if id == "" {
		id = "grpccounter/" + rand.Text()
	}
	res := s.com.Submit(part, key, id, delta)
	return res.Value, callError(ctx, res.Err)
}

// get returns key's counter, read under token t.
func (s *sqlStore) get(ctx context.Context, t fence.Token, key string) (int64, error) {
	part, err := s.store.Serve(ctx, t, key)
	if err == nil {
		err = part.Failure()
	}
	if err != nil {
		return 0, callError(ctx, err)
	}
	return part.Value(key), nil
}

// callError is what a call answers for err, a store's error: the end of
// the call's tenure (a stale write, a moved partition) as it is, for
// grpcroute.Server to turn into the retryable refusal; an idempotency key
// reused for another counter as codes.InvalidArgument; the caller's own
// end as it is; and anything else, a commit of unknown outcome or a
// partition's failed load (which the next call loads again), as
// codes.Unavailable, which grpcroute.Client retries with the same
// idempotency key.
func callError(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, counterdb.ErrKeyReused):
		return status.Error(codes.InvalidArgument, "grpccounter: "+err.Error())
	}
	if _, ended := ownership.Ended(ctx, err); ended || ctx.Err() != nil {
		return err
	}
	return status.Error(codes.Unavailable, "grpccounter: "+err.Error())
}
