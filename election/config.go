package election

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tenure-go/tenure/internal/keys"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/nilness"
)

// defaultResignTimeout bounds the Resign that Run performs when a term ends
// while the session is still alive, when ElectionConfig.ResignTimeout is
// zero.
const defaultResignTimeout = 5 * time.Second

// ElectionConfig describes one election and this candidate in it. The zero
// value of each optional field selects its documented default;
// DefaultElectionConfig returns them filled in. NewElection validates the
// config first and then copies it (Hooks and Fencers included): later
// changes to the caller's value have no effect.
type ElectionConfig struct {
	// Cluster selects the key prefix "/tenure/<Cluster>/" under which the
	// election's keys live ("<prefix>leader/<Name>/"). Either Cluster or
	// Prefix must be set. Cluster must not contain '/' or NUL, as
	// ownership.Config.Cluster.
	Cluster string
	// Prefix, if set, is used instead of the default prefix derived from
	// Cluster. A trailing '/' is added if missing. It must not contain NUL.
	Prefix string
	// Name names the election. It must be non-empty, contain neither '/' nor
	// NUL, and "leader/<Name>" must be a valid fence scope (no spaces or
	// control characters, at most fence.MaxScopeLen bytes).
	Name string
	// ID identifies this candidate to observers (Leader.ID), typically the
	// node ID. Empty means the session's lease ID in hexadecimal.
	ID string
	// Value is published with the candidacy (Leader.Value), for example the
	// node's address. It may be empty.
	Value string
	// ResignTimeout bounds the Resign that Run performs when it gives up a
	// term whose session is still alive, and the withdrawal of a candidacy.
	// Zero means 5s; negative is invalid.
	ResignTimeout time.Duration
	// Fencers are advanced, in order, to the token of every term this
	// candidate wins, before Campaign returns the Term (and before Run's
	// OnElected and fn): the stores behind them refuse the previous
	// leader's writes — and its reads, for stores that check reads — from
	// then on, even for keys the new leader has not touched yet. A fencer's
	// failure ends the term (its leader key is deleted) and Campaign returns
	// an error wrapping ErrFence and the fencer's error. An etcdfence.Store or
	// a sqlfence.Fencer is a Fencer, and fence.FencerFunc adapts a function;
	// the same interface serves ownership's Config.Fencers. Nil entries,
	// typed nils included, are invalid, and so is a fencer whose floors live
	// under another fleet's fence prefix (ErrForeignFencer): an
	// etcdfence.Store must name the election's Cluster (or Prefix).
	Fencers []fence.Fencer
	// Signer, if not nil, signs the token of every term this candidate
	// wins (Term.Signature; Run's fn gets it in its context), so that
	// downstream services can verify the leader's tokens with the public
	// key alone (fence.SignatureVerifier). Nil means terms go unsigned.
	Signer *fence.Signer
	// Hooks, if not nil, observes the terms that Run holds.
	Hooks *Hooks
	// Clock is the time source. Nil means the session's clock, or the system clock
	// for an election without a session.
	Clock clockwork.Clock
	// Logger receives the election's events, with the fields election (the
	// name), candidate (the ID), lease (the session's lease, in hex) and,
	// for a term's events, epoch: elected, fencers advanced (Info), fencer
	// failed (Warn), term ended (Info when resigned, Warn when the session
	// was lost or the key deleted; field reason: resigned, session_lost,
	// key_deleted), leader observed changed (Info; fields leader,
	// leader_epoch, leader_lease). Nil discards them.
	Logger hclog.Logger
	// Metrics, if not nil, is the registry NewElection registers the
	// election's metrics with, and Close unregisters them from:
	// tenure_election_is_leader, _terms_total, _campaign_failures_total,
	// _fencer_failures_total, _term_duration_seconds and
	// _forced_releases_total (see the package documentation). They carry
	// the const labels election (Name) and candidate (ID, or the lease in
	// hex), so several elections, and several candidates of one election,
	// share a registry; two open Elections with the same name and ID
	// cannot, and the second NewElection fails with ErrMetrics. Nil means
	// no metrics; the global registry is never used implicitly.
	Metrics prometheus.Registerer
}

// DefaultElectionConfig returns the configuration of an election with every
// default filled in: a 5s resign timeout and no logging. Clock stays nil
// (the session's clock); Cluster (or Prefix) and Name are left for the
// caller to set.
func DefaultElectionConfig() ElectionConfig {
	return ElectionConfig{}.withDefaults(nil)
}

// withDefaults returns a copy of c with every zero field that has a default
// filled in, a nil Clock set to fallback (when not nil), and its reference
// fields (Fencers, Hooks) copied. Negative values are kept so that Validate
// can report them.
func (c ElectionConfig) withDefaults(fallback clockwork.Clock) ElectionConfig {
	if c.ResignTimeout == 0 {
		c.ResignTimeout = defaultResignTimeout
	}
	if c.Clock == nil {
		c.Clock = fallback
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	c.Fencers = slices.Clone(c.Fencers)
	if c.Hooks != nil {
		h := *c.Hooks
		c.Hooks = &h
	}
	return c
}

// Hooks observes the life cycle of the terms that Run holds. Run calls the
// hooks from its own goroutine, in order and never concurrently: for every
// term, OnElected is called before fn starts and OnEnded after fn has
// returned; OnEnded is never called without the matching OnElected. Nil
// fields are skipped. Hooks must not block for long: the term is held while
// they run.
type Hooks struct {
	// OnElected is called when Run has won a term, before fn runs. ctx is
	// the term's context, the one fn gets: it carries t (and its signature,
	// fence.SignatureFromContext) and is cancelled when the term ends.
	OnElected func(ctx context.Context, t fence.Token)
	// OnEnded is called when the term has ended and fn has returned. reason
	// says why the term ended; it wraps ErrNotLeader, and, when Run gave the
	// term up because fn returned or ctx was done, ErrResigned together with
	// fn's error or ctx's.
	OnEnded func(t fence.Token, reason error)
}

// validateName reports whether name can name an election. The error wraps
// ErrInvalidConfig.
func validateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty election name", ErrInvalidConfig)
	case strings.ContainsRune(name, '/'):
		return fmt.Errorf("%w: election name %q contains '/'", ErrInvalidConfig, name)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("%w: election name %q contains NUL", ErrInvalidConfig, name)
	}
	if err := fence.ValidateScope(fence.LeaderScope(name)); err != nil {
		return fmt.Errorf("%w: election name %q: %v", ErrInvalidConfig, name, err)
	}
	return nil
}

// Validate reports whether c can configure an Election. Errors wrap
// ErrInvalidConfig.
func (c ElectionConfig) Validate() error {
	if err := validateName(c.Name); err != nil {
		return err
	}
	if err := keys.CheckFleet(c.Cluster, c.Prefix); err != nil {
		return fmt.Errorf("%w: election %q: %v", ErrInvalidConfig, c.Name, err)
	}
	if c.ResignTimeout < 0 {
		return fmt.Errorf("%w: election %q: resign timeout %v must not be negative", ErrInvalidConfig, c.Name, c.ResignTimeout)
	}
	if err := nilness.TypedNil(nilness.Field{Name: "metrics registerer", Value: c.Metrics}, nilness.Field{Name: "logger", Value: c.Logger}, nilness.Field{Name: "clock", Value: c.Clock}); err != nil {
		return fmt.Errorf("%w: election %q: %w", ErrInvalidConfig, c.Name, err)
	}
	fences := keys.For(c.Cluster, c.Prefix).Fences()
	for i, f := range c.Fencers {
		if nilness.Is(f) {
			return fmt.Errorf("%w: election %q: fencer %d is nil (%T)", ErrInvalidConfig, c.Name, i, f)
		}
		if err := keys.CheckFencer(f, fences); err != nil {
			return fmt.Errorf("%w: election %q: fencer %d: %w: %w", ErrInvalidConfig, c.Name, i, ErrForeignFencer, err)
		}
	}
	return nil
}
