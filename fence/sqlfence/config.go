package sqlfence

import (
	"fmt"
	"regexp"
	"strings"
)

// DefaultTable is the default name of the fences table.
const DefaultTable = "tenure_fences"

// Config configures Fences.
type Config struct {
	// Dialect is the database's SQL dialect. It must be set.
	Dialect Dialect
	// Table names the fences table, optionally qualified by a schema
	// ("fencing.tenure_fences"). Each part is an unquoted identifier of
	// letters, digits and underscores. Empty means DefaultTable.
	Table string
	// Metrics, if not nil, counts the tokens the Fences admit and refuse
	// (see Metrics). Nil means no metrics.
	Metrics *Metrics
}

// DefaultConfig returns the configuration for PostgreSQL with the default
// table.
func DefaultConfig() Config { return Config{Dialect: Postgres, Table: DefaultTable} }

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Validate reports whether c can configure Fences. The error wraps
// ErrInvalidConfig.
func (c Config) Validate() error {
	if !c.Dialect.valid() {
		return fmt.Errorf("%w: unknown dialect %v", ErrInvalidConfig, c.Dialect)
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
