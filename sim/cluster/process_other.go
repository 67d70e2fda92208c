//go:build !unix

package cluster

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"go.uber.org/zap"

	"github.com/tenure-go/tenure/sim/cluster/internal/memberspec"
)

const (
	sigStop syscall.Signal = 0
	sigCont syscall.Signal = 0
)

// process members need signals that only unix systems have.
type process struct{}

func startProcess([]string, memberspec.Spec, *zap.Logger, func(*process)) (*process, error) {
	return nil, fmt.Errorf("process members: %w", errors.ErrUnsupported)
}

func (*process) waitStarted(context.Context) error    { return errors.ErrUnsupported }
func (*process) wait(context.Context) (uint64, error) { return 0, errors.ErrUnsupported }
func (*process) leader() uint64                       { return 0 }
func (*process) Signal(syscall.Signal) error          { return errors.ErrUnsupported }
func (*process) Pid() int                             { return 0 }
func (*process) halt()                                {}
func (*process) close()                               {}
func (*process) stop()                                {}
