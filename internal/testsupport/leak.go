// Leak checks: VerifyTestMain verifies that a package's tests leave no goroutine
// behind, with goleak.
//
// It differs from goleak.VerifyTestMain in one way: it waits up to Grace for
// goroutines to end before reporting them. Stopping an embedded etcd member
// leaves its peer connections to end on their own read timeout (rafthttp's,
// 5s), so goroutines that do end would otherwise be reported as leaks. A real
// leak survives the grace period and fails the run.

package testsupport

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Grace is how long VerifyTestMain waits for goroutines to end.
const Grace = 15 * time.Second

// VerifyTestMain runs the tests and then fails the run if goroutines other
// than the main one are still running after Grace. Use it as
//
//	func TestMain(m *testing.M) { testsupport.VerifyTestMain(m) }
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := WaitNoLeaks(Grace, opts...); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines still running %v after the tests ended: %v\n", Grace, err)
			code = 1
		}
	}
	os.Exit(code)
}

// Wait polls goleak.Find until it finds nothing or grace has passed, and
// returns its last error.
func WaitNoLeaks(grace time.Duration, opts ...goleak.Option) error {
	deadline := time.Now().Add(grace)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
