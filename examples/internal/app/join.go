package app

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/ring"
)

// Join joins the fleet with cfg (ownership.Join), trying again until limit
// (or ctx) ends while etcd may not be up yet; a configuration the fleet
// refuses (a ring that disagrees with its spec, an invalid config, a node
// ID already in use) is no reason to wait, and ends it at once.
func Join(ctx context.Context, limit time.Duration, log hclog.Logger, cli ownership.Client, cfg ownership.Config) (*ownership.Node, error) {
	var node *ownership.Node
	err := Retry(ctx, limit, log, "join", func(ctx context.Context) error {
		var err error
		node, err = ownership.Join(ctx, cli, cfg)
		var mismatch *ring.SpecMismatchError
		if errors.As(err, &mismatch) || errors.Is(err, ownership.ErrInvalidConfig) || errors.Is(err, ownership.ErrDuplicateMember) {
			return Permanent{Err: err}
		}
		return err
	})
	return node, err
}
