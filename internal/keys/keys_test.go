package keys

import (
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLayout(t *testing.T) {
	l := New("prod")
	assert.Equal(t, "/tenure/prod/", l.Prefix())
	assert.Equal(t, "/tenure/prod/members/n1", l.Member("n1"))
	id, ok := l.MemberID("/tenure/prod/members/n1")
	assert.True(t, ok)
	assert.Equal(t, "n1", id)
	_, ok = l.MemberID("/tenure/prod/members/")
	assert.False(t, ok)
	assert.Equal(t, "/tenure/prod/claims/17", l.Claim(17))
	p, ok := l.ClaimPartition(l.Claim(17))
	assert.True(t, ok)
	assert.Equal(t, 17, p)
	for _, bad := range []string{"/tenure/prod/claims/", "/tenure/prod/claims/x", "/tenure/prod/claims/-1", "/tenure/prod/claims/07", "/other/claims/1"} {
		_, ok := l.ClaimPartition(bad)
		assert.False(t, ok, bad)
	}
	assert.Equal(t, "/tenure/prod/leader/x/", l.Leader("x"))
	assert.Equal(t, "/tenure/prod/fence/", l.Fences())
	assert.Equal(t, "/x/", ForPrefix("/x").Prefix())
	assert.Equal(t, "/x/members/", ForPrefix("/x").Members())
	assert.Equal(t, l, For("prod", ""))
	assert.Equal(t, ForPrefix("/x/"), For("prod", "/x"))

	v, err := EncodeMember(Member{ID: "n1", Addr: "127.0.0.1:1", Meta: map[string]string{"zone": "a"}})
	require.NoError(t, err)
	m, err := DecodeMember([]byte(v))
	require.NoError(t, err)
	assert.Equal(t, "a", m.Meta["zone"])
	_, err = DecodeMember([]byte("{"))
	assert.Error(t, err)
}

func TestOperatorKeys(t *testing.T) {
	l := New("prod")
	assert.Equal(t, "/tenure/prod/drained/n1", l.Drained("n1"))
	id, ok := l.DrainedID(l.Drained("n1"))
	assert.True(t, ok)
	assert.Equal(t, "n1", id)
	_, ok = l.DrainedID(l.DrainedPrefix())
	assert.False(t, ok)
	assert.Equal(t, "/tenure/prod/leader/", l.Leaders())
	early := AuditID(time.Unix(9, 0), "ffffffff")
	late := AuditID(time.Unix(10, 0), "00000000")
	assert.Equal(t, "0000000009000000000-ffffffff", early)
	assert.Less(t, early, late, "ids sort by time")
	assert.Equal(t, "/tenure/prod/audit/"+late, l.Audit(late))
}

func TestClaimValue(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	c := DecodeClaim([]byte(EncodeClaim("n1", at)))
	assert.Equal(t, "n1", c.Node)
	assert.True(t, at.Equal(c.Since))
	assert.Equal(t, time.UTC, c.Since.Location())
	for v, want := range map[string]Claim{
		"n1":                         {Node: "n1"},
		"":                           {},
		`{"node":""}`:                {Node: `{"node":""}`},
		`{"node":"a","since":"bad"}`: {Node: `{"node":"a","since":"bad"}`},
		`{"node":"a"}`:               {Node: "a"},
	} {
		assert.Equal(t, want, DecodeClaim([]byte(v)), v)
	}
}

// FuzzDecodeClaim: decoding never panics, and what EncodeClaim writes for
// a node ID (valid UTF-8, as every node ID is) decodes to itself.
func FuzzDecodeClaim(f *testing.F) {
	f.Add([]byte("n1"))
	f.Add([]byte(EncodeClaim("n1", time.Unix(1, 2))))
	f.Add([]byte(`{"node":`))
	f.Fuzz(func(t *testing.T, v []byte) {
		c := DecodeClaim(v)
		if len(v) > 0 && c.Node == "" {
			t.Fatalf("%q decodes to no node", v)
		}
		if c.Node != "" && utf8.ValidString(c.Node) {
			back := DecodeClaim([]byte(EncodeClaim(c.Node, c.Since)))
			if back.Node != c.Node || !back.Since.Equal(c.Since) {
				t.Fatalf("%q: round trip %+v -> %+v", v, c, back)
			}
		}
	})
}

func TestCheckFleet(t *testing.T) {
	require.NoError(t, CheckFleet("prod", ""))
	require.NoError(t, CheckFleet("", "/x/"))
	require.NoError(t, CheckFleet("prod", "/x/"))
	require.ErrorIs(t, CheckFleet("", ""), ErrNoCluster)
	for _, bad := range [][2]string{{"a/b", ""}, {"a\x00", ""}, {"", "/x\x00/"}} {
		err := CheckFleet(bad[0], bad[1])
		require.Error(t, err, "%q", bad)
		require.NotErrorIs(t, err, ErrNoCluster)
	}
}
