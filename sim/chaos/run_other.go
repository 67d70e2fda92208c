//go:build !unix

package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Run needs signals that only unix systems have.
func Run(context.Context, Config, io.Writer) (*Report, error) {
	return nil, fmt.Errorf("chaos: %w", errors.ErrUnsupported)
}
