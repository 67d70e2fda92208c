package grpcroute

import (
	"context"

	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router/internal/admit"
)

// hold admits a call for key, waiting for a handoff as router.Router.Do
// does (admit.Hold), up to ServerConfig.HandoffWait and while ctx lasts.
// When it does not admit the call it returns the node's last answer and the
// hint of where the call goes.
func (s *Server) hold(ctx context.Context, key string) (ownership.Held, *ownership.WrongOwnerError, error) {
	return admit.Hold(ctx, s.node, admit.Wait{Self: s.id, For: s.cfg.HandoffWait, Clock: s.cfg.Clock}, key)
}
