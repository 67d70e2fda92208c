package restore

import (
	"testing"

	"github.com/tenure-go/tenure/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.VerifyTestMain(m) }
