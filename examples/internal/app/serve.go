package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/ownership"
)

// Wait returns when a node's serving ends: nil when ctx ends (a signal
// asks the process to leave), an error when the server fails (its Serve's
// error arrives on served, a channel with room for one, where Wait puts it
// back for the graceful stop that waits for it; what names the server), or
// when the node stops.
func Wait(ctx context.Context, log hclog.Logger, node *ownership.Node, what string, served chan error) error {
	select {
	case <-ctx.Done():
		log.Info("leaving the fleet", "cause", context.Cause(ctx))
		return nil
	case err := <-served:
		served <- err
		return fmt.Errorf("%s server: %w", what, err)
	case <-node.Done():
		return errors.New("the node stopped")
	}
}

// Leave makes node leave the fleet gracefully (ownership.Node.Close: its
// partitions hand off once the work in flight has finished), waiting up to
// limit, and logs how long it took. ctx may have ended: Leave keeps its
// values, not its cancellation. It returns the context the rest of the
// graceful stop runs under, bounded by the same limit, and its cancel.
func Leave(ctx context.Context, limit time.Duration, log hclog.Logger, node *ownership.Node) (context.Context, context.CancelFunc) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	began := time.Now()
	if err := node.Close(lctx); err != nil {
		log.Warn("leave", "error", err)
	}
	log.Info("left the fleet", "took", time.Since(began).Round(time.Millisecond).String())
	return lctx, cancel
}
