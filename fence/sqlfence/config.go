package sqlfence

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/internal/nilness"
)

// defaultTable is the default name of the fences table.
const defaultTable = "tenure_fences"

// Config configures Fences.
type Config struct {
	// Dialect is the database's SQL dialect. It must be set.
	Dialect Dialect
	// Table names the fences table, optionally qualified by a schema
	// ("fencing.tenure_fences"). Each part is an unquoted identifier of
	// letters, digits and underscores. Empty means "tenure_fences".
	Table string
	// Metrics, if not nil, is the registry New registers the fence
	// metrics with (see metrics.go): tenure_fence_admitted_total and
	// tenure_fence_rejections_total, labelled store="sql". Fences that
	// share a registry share the metrics. Nil means no metrics.
	Metrics prometheus.Registerer
}

// DefaultConfig returns the configuration for PostgreSQL with the default
// table.
func DefaultConfig() Config { return Config{Dialect: Postgres, Table: defaultTable} }

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Validate reports whether c can configure Fences. The error wraps
// ErrInvalidConfig.
func (c Config) Validate() error {
	if !c.Dialect.valid() {
		return fmt.Errorf("%w: unknown dialect %v", ErrInvalidConfig, c.Dialect)
	}
	if c.Metrics != nil && nilness.Is(c.Metrics) {
		return fmt.Errorf("%w: metrics registerer is a nil %T", ErrInvalidConfig, c.Metrics)
	}
	if c.Table == "" {
		return nil
	}
	parts := strings.Split(c.Table, ".")
	if len(parts) > 2 {
		return fmt.Errorf("%w: table %q has more than schema.table", ErrInvalidConfig, c.Table)
	}
	for _, p := range parts {
		if !identRE.MatchString(p) {
			return fmt.Errorf("%w: table %q: %q is not a plain identifier", ErrInvalidConfig, c.Table, p)
		}
	}
	return nil
}

// BatcherConfig tunes a Batcher.
type BatcherConfig struct {
	// MaxBatch is the most writes one transaction carries. Zero means 256.
	MaxBatch int
	// Timeout bounds one batch's transaction, from its begin to its
	// commit. It follows no caller's context: once a batch has begun, the
	// database decides, and a caller's cancellation would turn the
	// others' definite answers into unknown outcomes. Zero means 10s.
	Timeout time.Duration
}

// DefaultBatcherConfig returns the defaults: 256 writes a batch, 10s a
// transaction.
func DefaultBatcherConfig() BatcherConfig {
	return BatcherConfig{MaxBatch: 256, Timeout: 10 * time.Second}
}

// Validate reports whether c can configure a Batcher. The error wraps
// ErrInvalidConfig.
func (c BatcherConfig) Validate() error {
	switch {
	case c.MaxBatch < 0:
		return fmt.Errorf("%w: batcher max batch %d is negative", ErrInvalidConfig, c.MaxBatch)
	case c.Timeout < 0:
		return fmt.Errorf("%w: batcher timeout %v is negative", ErrInvalidConfig, c.Timeout)
	}
	return nil
}

// withDefaults fills the zero fields of c with DefaultBatcherConfig's.
func (c BatcherConfig) withDefaults() BatcherConfig {
	d := DefaultBatcherConfig()
	if c.MaxBatch == 0 {
		c.MaxBatch = d.MaxBatch
	}
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	return c
}
