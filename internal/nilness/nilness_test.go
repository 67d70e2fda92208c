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
