package check_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/tenure-go/tenure/sim/check"
)

func put(client, key, v string, inv, ret int, o check.Outcome) check.Op {
	op := check.Op{Client: client, Key: key, Kind: check.Put, Value: v, Invoke: ms(inv), Return: ms(ret), Outcome: o}
	if o == check.Unknown {
		op.Return = check.Never
	}
	return op
}

func get(client, key, v string, inv, ret int) check.Op {
	return check.Op{Client: client, Key: key, Kind: check.Get, Value: v, Invoke: ms(inv), Return: ms(ret), Outcome: check.Accepted}
}

func count(client string, n int64, inv, ret int) check.Op {
	return check.Op{Client: client, Key: "c", Kind: check.Count, N: n, HasN: true, Invoke: ms(inv), Return: ms(ret), Outcome: check.Accepted}
}

func TestLinearizable(t *testing.T) {
	withN := func(op check.Op, n int64) check.Op { op.N, op.HasN = n, true; return op }
	tests := []struct {
		name    string
		ops     []check.Op
		initial map[string]string
		illegal []string
	}{
		{name: "empty"},
		{name: "sequential register", ops: []check.Op{put("a", "x", "1", 0, 10, check.Accepted), get("b", "x", "1", 20, 30)}},
		{name: "concurrent get may see old or new", ops: []check.Op{
			put("a", "x", "1", 0, 10, check.Accepted), get("b", "x", "", 5, 15), get("c", "x", "1", 5, 15)}},
		{name: "stale read after a completed put", illegal: []string{"x"}, ops: []check.Op{
			put("a", "x", "1", 0, 10, check.Accepted), get("b", "x", "", 20, 30)}},
		{name: "initial value", initial: map[string]string{"x": "i"}, ops: []check.Op{get("b", "x", "i", 0, 1)}},
		{name: "a read going back in time", illegal: []string{"y"}, ops: []check.Op{
			put("a", "y", "1", 0, 10, check.Accepted), put("a", "y", "2", 20, 30, check.Accepted),
			get("b", "y", "2", 35, 40), get("c", "y", "1", 45, 50)}},
		{name: "an unknown put may land late", ops: []check.Op{
			put("a", "x", "1", 0, 0, check.Unknown), get("b", "x", "", 100, 110), get("b", "x", "1", 200, 210)}},
		{name: "an unknown put cannot be undone", illegal: []string{"x"}, ops: []check.Op{
			put("a", "x", "1", 0, 0, check.Unknown), get("b", "x", "1", 100, 110), get("b", "x", "", 200, 210)}},
		{name: "only rejected operations", ops: []check.Op{put("a", "x", "1", 0, 10, check.Rejected)}},
		{name: "a rejected put is ignored", ops: []check.Op{
			put("a", "x", "1", 0, 10, check.Rejected), get("b", "x", "", 100, 110)}},
		{name: "keys are independent", illegal: []string{"z"}, ops: []check.Op{
			put("a", "x", "1", 0, 10, check.Accepted), get("b", "x", "1", 20, 30),
			put("a", "z", "1", 0, 10, check.Accepted), get("b", "z", "2", 20, 30)}},
		{name: "counter with a deduplicated retry", ops: []check.Op{
			incr("a", "i1", 0, 0, check.Unknown), withN(incr("a", "i1", 10, 20, check.Accepted), 1),
			withN(incr("b", "i2", 30, 40, check.Accepted), 2), count("c", 2, 50, 60)}},
		{name: "counter applied twice", illegal: []string{"c"}, ops: []check.Op{
			incr("a", "i1", 0, 10, check.Accepted), incr("a", "i1", 20, 30, check.Accepted), count("c", 2, 50, 60)}},
		{name: "counter read missing an acknowledged increment", illegal: []string{"c"}, ops: []check.Op{
			incr("a", "i1", 0, 10, check.Accepted), incr("b", "i2", 0, 10, check.Accepted), count("c", 1, 50, 60)}},
		{name: "counter increment reply checked", illegal: []string{"c"}, ops: []check.Op{
			withN(incr("a", "i1", 0, 10, check.Accepted), 5)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := check.Linearizable(&check.History{Ops: tt.ops, Initial: tt.initial}, check.LinearConfig{})
			mustNoErr(t, err)
			var got []string
			for _, v := range res.Illegal {
				got = append(got, v.Key)
			}
			if strings.Join(got, ",") != strings.Join(tt.illegal, ",") {
				t.Fatalf("illegal keys %v, want %v", res.Illegal, tt.illegal)
			}
			want := porcupine.Ok
			if len(tt.illegal) > 0 {
				want = porcupine.Illegal
			}
			if res.Result != want || res.OK() != (want == porcupine.Ok) {
				t.Errorf("result %v, want %v", res.Result, want)
			}
		})
	}
}

func TestLinearizableVisualization(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.html")
	h := &check.History{Ops: []check.Op{
		put("a", "x", "1", 0, 10, check.Accepted), put("a", "x", "2", 20, 0, check.Unknown), get("b", "x", "", 20, 30)}}
	res, err := check.Linearizable(h, check.LinearConfig{VisualizePath: path, Timeout: time.Minute, Parallelism: 1})
	mustNoErr(t, err)
	if res.OK() || res.Visualization != path {
		t.Fatalf("result %+v, want illegal with a visualization", res)
	}
	b, err := os.ReadFile(path)
	mustNoErr(t, err)
	if !strings.Contains(string(b), "<html") || !strings.Contains(string(b), `put(\"1\")`) {
		t.Errorf("visualization does not look like porcupine's HTML (%d bytes)", len(b))
	}

	ok := &check.History{Ops: []check.Op{put("a", "x", "1", 0, 10, check.Accepted)}}
	path2 := filepath.Join(t.TempDir(), "ok.html")
	res, err = check.Linearizable(ok, check.LinearConfig{VisualizePath: path2})
	mustNoErr(t, err)
	if _, err := os.Stat(path2); !res.OK() || res.Visualization != "" || err == nil {
		t.Errorf("a linearizable history wrote a visualization")
	}
	if _, err := check.Linearizable(ok, check.LinearConfig{Parallelism: -1}); !errors.Is(err, check.ErrInvalidConfig) {
		t.Errorf("negative parallelism accepted")
	}
}
