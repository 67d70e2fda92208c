package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/examples/internal/sqldb"
	"github.com/tenure-go/tenure/fence/sqlfence"
)

// defaultMargin is the default of rewind-check's --margin: the revisions
// added to what the floors show. The highest floor a store holds is a
// lower bound of the revisions the lost etcd issued: claims whose fencers
// had not run yet, stores not checked (etcdfence's floors restore with
// etcd; an httpfence'd downstream keeps its own) and every write after
// the check issued more. A billion revisions is a day of etcd at ten
// thousand writes a second, far beyond what it issues between a check and
// a restore; revisions are int64, so the margin costs nothing. It is the
// value Kubernetes' documentation gives etcdutl's --bump-revision.
const defaultMargin = 1_000_000_000

// rewindCheck is what rewind-check prints.
type rewindCheck struct {
	// FloorEpoch is the highest floor the fences table holds, and
	// FloorScope its scope; 0 and "" if the table is empty.
	FloorEpoch int64  `json:"floor_epoch"`
	FloorScope string `json:"floor_scope"`
	// Revision is etcd's revision, as etcd answered or as --revision gave
	// it (the snapshot's, from etcdutl snapshot status); Source says
	// which: "etcd" or "flag".
	Revision int64  `json:"revision"`
	Source   string `json:"source"`
	// Rewound reports that the floor is above the revision: a fleet on an
	// etcd at this revision would meet floors above its epochs.
	Rewound bool `json:"rewound"`
	// Margin is --margin, and BumpRevision the value for etcdutl snapshot
	// restore --bump-revision: the floor minus the revision (if the floor
	// is above it) plus the margin.
	Margin       int64 `json:"margin"`
	BumpRevision int64 `json:"bump_revision"`
}

// cmdRewindCheck compares the highest floor of a SQL fences table, kept
// where a restore of etcd cannot rewind it, with etcd's revision (or the
// revision of a snapshot, --revision), and prints the --bump-revision a
// restore of etcd needs so that every epoch it issues is above every floor.
func cmdRewindCheck(g *globals, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("rewind-check", flag.ContinueOnError)
	db := fs.String("db", "", "the fences' database: sqlite:PATH or a postgres:// URL")
	table := fs.String("table", "tenure_fences", "the fences table (sqlfence.Config.Table)")
	revision := fs.Int64("revision", 0, "etcd's revision to compare with (a snapshot's); default: ask etcd")
	margin := fs.Int64("margin", defaultMargin, "revisions added to the difference")
	pos, err := parse(fs, g, args)
	switch {
	case err != nil:
		return err
	case len(pos) > 0:
		return usagef("unexpected argument %q", pos[0])
	case *db == "":
		return usagef("--db is required: the database of the fences table (sqlite:PATH or a postgres:// URL)")
	case *revision < 0 || *margin < 0:
		return usagef("--revision %d and --margin %d must not be negative", *revision, *margin)
	}
	if err := (sqlfence.Config{Dialect: sqlfence.SQLite, Table: *table}).Validate(); err != nil {
		return usagef("--table: %v", err)
	}
	c := rewindCheck{Revision: *revision, Source: "flag", Margin: *margin}
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	if c.FloorScope, c.FloorEpoch, err = highestFloor(ctx, *db, *table, g.timeout); err != nil {
		return err
	}
	if c.Revision == 0 {
		s, err := dial(g)
		if err != nil {
			return err
		}
		defer s.close()
		resp, err := s.cli.Get(s.ctx, fleetsRoot, clientv3.WithCountOnly())
		if err != nil {
			return s.wrap(err)
		}
		c.Revision, c.Source = resp.Header.Revision, "etcd"
	}
	c.Rewound = c.FloorEpoch > c.Revision
	c.BumpRevision = max(c.FloorEpoch-c.Revision, 0) + c.Margin
	return emit(g, out, c, func(w io.Writer, c rewindCheck) {
		fmt.Fprintf(w, "highest floor\t%d\t%s\n", c.FloorEpoch, c.FloorScope)
		fmt.Fprintf(w, "etcd revision\t%d\t(%s)\n", c.Revision, map[string]string{"etcd": "etcd answered", "flag": "--revision"}[c.Source])
		if c.Rewound {
			fmt.Fprintf(w, "rewound\tyes\tthe floor is %d revisions ahead: a fleet on this etcd would have its epochs refused\n", c.FloorEpoch-c.Revision)
		} else {
			fmt.Fprintf(w, "rewound\tno\tevery epoch this etcd issues is above every floor\n")
		}
		fmt.Fprintf(w, "bump revision\t%d\t(etcdutl snapshot restore --bump-revision %d --mark-compacted; margin %d)\n", c.BumpRevision, c.BumpRevision, c.Margin)
	})
}

// highestFloor returns the scope and epoch of the highest floor of the
// fences table of the database spec names ("", 0 if it has none).
func highestFloor(ctx context.Context, spec, table string, ttl time.Duration) (string, int64, error) {
	db, _, err := sqldb.Open(spec, ttl)
	if err != nil {
		return "", 0, err
	}
	defer db.Close()
	var scope string
	var epoch int64
	// table is a plain identifier, or schema.table: sqlfence.Config.Validate.
	err = db.QueryRowContext(ctx, "SELECT scope, epoch FROM "+table+" ORDER BY epoch DESC LIMIT 1").Scan(&scope, &epoch)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", 0, nil
	case err != nil:
		return "", 0, fmt.Errorf("read the floors of %s: %w", table, err)
	}
	return scope, epoch, nil
}
