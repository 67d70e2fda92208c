package ownership

import (
	"os"
	"testing"

	"github.com/tenure-go/tenure/internal/testsupport"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" { // this test binary runs as a node's process (see child_test.go)
		os.Exit(runChild())
	}
	testsupport.VerifyTestMain(m)
}
