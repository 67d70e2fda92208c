//go:build unix

package chaos

import (
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/tenure-go/tenure/internal/childproc"
)

// process is one run of a worker in a child process (see
// childproc.Process: it never outlives the runner).
type process struct{ *childproc.Process }

// startProcess runs bin with args; line receives every line of its
// standard output, from one goroutine; stderr receives its standard error.
func startProcess(bin string, args []string, line func([]byte), stderr io.Writer) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdout = &childproc.LineWriter{Line: line}
	cmd.Stderr = stderr
	p, err := childproc.Start(cmd, nil)
	if err != nil {
		return nil, fmt.Errorf("chaos: start worker: %w", err)
	}
	return &process{p}, nil
}

func (p *process) stop() error { return p.Signal(syscall.SIGSTOP) }
func (p *process) cont() error { return p.Signal(syscall.SIGCONT) }

// term continues the child if it is stopped, asks it to leave gracefully
// (SIGTERM) and kills it if it has not exited within grace.
func (p *process) term(grace time.Duration) {
	_ = p.cont()
	p.Term(grace)
}

// workerLogTail is how much of a worker's standard error its exit is
// reported with.
const workerLogTail = 4 << 10
