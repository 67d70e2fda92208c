package router_test

import (
	"os"
	"testing"

	"github.com/tenure-go/tenure/internal/testsupport"
)

func TestMain(m *testing.M) {
	if os.Getenv(childNodeEnv) != "" {
		os.Exit(childNode(os.Getenv(childNodeEnv)))
	}
	testsupport.VerifyTestMain(m)
}
