package grpcroute_test

import (
	"os"
	"testing"

	"github.com/tenure-go/tenure/internal/testsupport"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childNodeEnv); spec != "" { // this test binary runs as a node's process (childnode_test.go)
		os.Exit(childNode(spec))
	}
	testsupport.VerifyTestMain(m)
}
