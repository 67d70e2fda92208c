package keys

import (
	"testing"

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
