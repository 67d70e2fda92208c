package ownership

import (
	"os"
	"testing"

	"github.com/tenure-go/tenure/internal/leakcheck"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" { // this test binary runs as a node's process (see child_test.go)
		os.Exit(runChild())
	}
	leakcheck.VerifyTestMain(m)
}
