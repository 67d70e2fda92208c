// Package childproc starts the child processes of tenure's test harnesses
// (etcd members, chaos workers) so that they die with their parent (Start,
// whose Process also kills or stops them with their process group), and
// reads their output: by line (LineWriter), keeping the end for error
// messages (Tail).
package childproc

import (
	"os/exec"
	"runtime"
)

// start starts cmd from a goroutine locked to its OS thread, which stays
// alive until the child has been reaped: a Pdeathsig set in
// cmd.SysProcAttr fires when the thread that forked the child exits, not
// the process. exited is called with cmd.Wait's error once the child is
// reaped. start returns cmd.Start's error.
func start(cmd *exec.Cmd, exited func(error)) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited(cmd.Wait())
	}()
	return <-started
}
