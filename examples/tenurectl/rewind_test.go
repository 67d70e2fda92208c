package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/examples/internal/sqldb"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/sqlfence"
	"github.com/tenure-go/tenure/sim/cluster"
)

// fencesDB creates a SQLite database with sqlfence's table holding floors,
// and returns its --db spec.
func fencesDB(t *testing.T, floors map[string]int64) string {
	t.Helper()
	spec := "sqlite:" + filepath.Join(t.TempDir(), "fences.db")
	db, dialect, err := sqldb.Open(spec, 10*time.Second)
	require.NoError(t, err)
	defer db.Close()
	fs, err := sqlfence.New(sqlfence.Config{Dialect: dialect})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, fs.CreateTable(ctx, db))
	f := sqlfence.Fencer{DB: db, Fences: fs}
	for scope, epoch := range floors {
		require.NoError(t, f.Advance(ctx, fence.Token{Scope: scope, Epoch: epoch}))
	}
	return spec
}

// rewind-check reads the highest floor of a fences table and etcd's
// revision (or the one --revision gives) and prints the --bump-revision a
// restore needs: the floor minus the revision, plus the margin.
func TestRewindCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts etcd")
	}
	bin := buildCtl(t)
	c := cluster.New(t, 1)
	x := ctl{t: t, bin: bin, base: []string{"--endpoints", strings.Join(c.Endpoints(), ","), "--timeout", "10s"}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := c.NewClient(t)
	resp, err := cli.Get(ctx, "any")
	require.NoError(t, err)
	rev := resp.Header.Revision

	// Floors above etcd's revision: rewound.
	db := fencesDB(t, map[string]int64{"p/1": rev + 500, "p/2": rev + 900, "leader/x": rev + 10})
	var got rewindCheck
	x.json(&got, "rewind-check", "--db", db)
	assert.Equal(t, rewindCheck{FloorEpoch: rev + 900, FloorScope: "p/2", Revision: rev, Source: "etcd",
		Rewound: true, Margin: defaultMargin, BumpRevision: 900 + defaultMargin}, got)
	text := x.ok("rewind-check", "--db", db, "--margin", "7")
	assert.Contains(t, text, "rewound        yes")
	assert.Contains(t, text, "--bump-revision 907 --mark-compacted")

	// A snapshot's revision given by hand; a revision past every floor.
	x.json(&got, "rewind-check", "--db", db, "--revision", "3", "--margin", "0")
	assert.Equal(t, rewindCheck{FloorEpoch: rev + 900, FloorScope: "p/2", Revision: 3, Source: "flag",
		Rewound: true, BumpRevision: rev + 897}, got)
	x.json(&got, "rewind-check", "--db", db, "--revision", strconv.FormatInt(rev+1000, 10), "--margin", "5")
	assert.False(t, got.Rewound)
	assert.Equal(t, int64(5), got.BumpRevision)

	// An empty table; bad usage.
	x.json(&got, "rewind-check", "--db", fencesDB(t, nil), "--margin", "1")
	assert.Equal(t, rewindCheck{Revision: rev, Source: "etcd", Margin: 1, BumpRevision: 1}, got)
	for _, args := range [][]string{
		{"rewind-check"},
		{"rewind-check", "--db", db, "--table", "x; drop"},
		{"rewind-check", "--db", db, "--margin", "-1"},
		{"rewind-check", "--db", db, "extra"},
	} {
		assert.Equal(t, 2, x.run(args...).code, "%v", args)
	}
	r := x.run("rewind-check", "--db", db, "--table", "missing")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.err, "read the floors of missing")
}
