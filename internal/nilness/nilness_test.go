package nilness_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/nilness"
)

func TestIs(t *testing.T) {
	var cli *clientv3.Client
	var kv clientv3.KV = cli
	var m map[string]int
	var f func()
	assert.True(t, nilness.Is(nil))
	assert.True(t, nilness.Is(kv), "interface holding a nil pointer")
	assert.True(t, nilness.Is(m))
	assert.True(t, nilness.Is(f))
	assert.False(t, nilness.Is(&clientv3.Client{}))
	assert.False(t, nilness.Is(0))
	assert.False(t, nilness.Is(""))
	assert.False(t, nilness.Is(map[string]int{}))
}

func TestTypedNil(t *testing.T) {
	var cli *clientv3.Client
	var kv clientv3.KV = cli
	assert.NoError(t, nilness.TypedNil())
	assert.NoError(t, nilness.TypedNil(nilness.Field{Name: "kv", Value: nil}), "a plain nil is a default")
	assert.NoError(t, nilness.TypedNil(nilness.Field{Name: "kv", Value: &clientv3.Client{}}))
	err := nilness.TypedNil(nilness.Field{Name: "logger", Value: nil}, nilness.Field{Name: "kv", Value: kv}, nilness.Field{Name: "m", Value: map[string]int(nil)})
	assert.EqualError(t, err, "kv is a nil *clientv3.Client", "the first typed nil")
}
