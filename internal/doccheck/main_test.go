package doccheck

import (
	"testing"

	"github.com/tenure-go/tenure/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }
