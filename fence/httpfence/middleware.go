package httpfence

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/nilness"
	"github.com/tenure-go/tenure/internal/refusal"
)

// Config configures a Handler. Verifier and Fencer are required; the
// other fields are optional, and their zero values are the defaults.
type Config struct {
	// Verifier tells whether the fleet issued each request's token (see
	// Verifier): a *fence.SignatureVerifier, a *fleet.Observer, or
	// InsecureNoVerify on a network where every caller is trusted. A
	// Handler never admits a token its Verifier has not verified.
	Verifier Verifier
	// Fencer advances to each verified token, or refuses it: nil, a
	// *fence.StaleError (errors.Is fence.ErrStale), an error wrapping
	// fence.ErrInvalidToken, or any other failure. etcdfence.Store and
	// sqlfence.Fencer and *fence.Gate are Fencers.
	Fencer fence.Fencer
	// Optional lets requests without the header through, unfenced: their
	// context carries no token. By default they are refused with
	// RefusalNoToken.
	Optional bool
	// Metrics, if not nil, is where the Handler registers the metrics
	// that count what it admits and refuses (see the package
	// documentation). Handlers given one registry share the counts. Nil
	// means no metrics.
	Metrics prometheus.Registerer
	// Logger, if not nil, receives a warning for every request whose token
	// the Verifier refused or could not decide on: the scope, epoch and key
	// ID of the token, the reason and the caller's address, never the
	// signature. Nil means no logs.
	Logger *slog.Logger
}

// Validate reports whether c can configure a Handler. The error wraps
// ErrNilArgument when the Verifier or the Fencer is nil, a typed nil
// included, or Metrics holds a typed nil: a Handler admits only tokens it can verify, unless it is given
// InsecureNoVerify.
func (c Config) Validate() error {
	if nilness.Is(c.Verifier) {
		return fmt.Errorf("%w: verifier %T (pass a Verifier, or InsecureNoVerify on a trusted network)", ErrNilArgument, c.Verifier)
	}
	if nilness.Is(c.Fencer) {
		return fmt.Errorf("%w: fencer %T", ErrNilArgument, c.Fencer)
	}
	if err := nilness.TypedNil(nilness.Field{Name: "metrics registerer", Value: c.Metrics}); err != nil {
		return fmt.Errorf("%w: %w", ErrNilArgument, err)
	}
	return nil
}

// Handler admits a request only with a token that its Verifier shows the
// fleet issued, and that its Fencer then admits: it verifies the token,
// advances the Fencer to it, and passes the request on with the token (and
// its signature, if one came) in its context. A token the Verifier cannot
// verify never reaches the Fencer, so it never raises a floor. It is safe
// for concurrent use if its Verifier, Fencer and next handler are. The zero
// Handler refuses every request with RefusalUnavailable.
type Handler struct {
	cfg     Config
	next    http.Handler
	metrics *handlerMetrics
}

// New returns the Handler that verifies each request's token with
// cfg.Verifier and advances cfg.Fencer to it before calling next. It
// returns an error wrapping ErrNilArgument if cfg does not validate or
// next is nil (a typed nil included), and one wrapping ErrMetrics if the
// metrics cannot be registered with cfg.Metrics.
func New(next http.Handler, cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if nilness.Is(next) {
		return nil, fmt.Errorf("%w: next handler %T", ErrNilArgument, next)
	}
	h := &Handler{cfg: cfg, next: next}
	if cfg.Metrics != nil {
		m, err := newHandlerMetrics(cfg.Metrics)
		if err != nil {
			return nil, err
		}
		h.metrics = m
	}
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h == nil || h.next == nil {
		_ = WriteRefusal(w, &Refusal{Kind: RefusalUnavailable, Message: "httpfence: the handler was not made by New"})
		return
	}
	tok, present, err := fromHeader(r.Header)
	switch {
	case err != nil:
		h.metrics.rejected("")
		writeError(w, err)
		return
	case !present && h.cfg.Optional:
		h.next.ServeHTTP(w, r)
		return
	case !present:
		h.metrics.rejected("")
		writeError(w, fmt.Errorf("%w: the %s header is required", fence.ErrNoToken, Header))
		return
	}
	sig, err := signatureFromHeader(r.Header)
	if err == nil {
		err = h.cfg.Verifier.Verify(r.Context(), tok, sig)
	}
	if err != nil {
		h.refuseUnverified(w, r, tok, sig, err)
		return
	}
	if err := h.cfg.Fencer.Advance(r.Context(), tok); err != nil {
		h.metrics.rejected(tok.Scope)
		if !writeError(w, err) {
			_ = WriteRefusal(w, &Refusal{Kind: RefusalUnavailable,
				Message: fmt.Sprintf("httpfence: the fence could not advance to %s: %v", tok, err)})
		}
		return
	}
	h.metrics.admitted()
	h.next.ServeHTTP(w, r.WithContext(fence.NewSignedContext(r.Context(), tok, sig)))
}

// refuseUnverified answers a request whose token tok (with sig) the
// Verifier refused with err, counts and logs it: stale as RefusalStale,
// unverified as RefusalUnverified, anything else as RefusalUnavailable.
func (h *Handler) refuseUnverified(w http.ResponseWriter, r *http.Request, tok fence.Token, sig fence.Signature, err error) {
	reason := reasonOf(err)
	h.metrics.unverified(tok.Scope, reason)
	if h.cfg.Logger != nil {
		h.cfg.Logger.LogAttrs(r.Context(), slog.LevelWarn, "httpfence: token refused by the verifier",
			slog.String("scope", tok.Scope), slog.Int64("epoch", tok.Epoch), slog.String("key_id", sig.KeyID),
			slog.String("reason", reason), slog.String("remote", r.RemoteAddr), slog.String("error", err.Error()))
	}
	if writeError(w, err) {
		return
	}
	_ = WriteRefusal(w, &Refusal{Kind: RefusalUnavailable,
		Message: fmt.Sprintf("httpfence: the verifier could not decide on %s: %v", tok, err)})
}

// writeError answers a request with the refusal that err stands for
// (RefusalOf), if it is one, and reports whether it answered.
func writeError(w http.ResponseWriter, err error) bool {
	r := RefusalOf(err)
	return r != nil && WriteRefusal(w, r) == nil
}

// RefusalOf returns the refusal that err stands for at the level of
// tokens, or nil if it stands for none: a *Refusal as it is; otherwise the
// kind whose fencing error err matches in the refusal table: a stale
// token (errors.Is fence.ErrStale, described when errors.As finds a
// *fence.StaleError) as RefusalStale, an invalid one (fence.ErrInvalidToken)
// as RefusalInvalidToken, a missing one (fence.ErrNoToken) as
// RefusalNoToken, an unverified one (fence.ErrUnverified) as
// RefusalUnverified. The Handler answers with it; handlers that serve
// fenced writes answer with router.WriteError, which also answers the end
// of a tenure.
func RefusalOf(err error) *Refusal {
	var (
		ref *Refusal
		se  *fence.StaleError
	)
	if errors.As(err, &ref) {
		return ref
	}
	row, ok := refusal.Lookup(refusal.KindOf(err))
	switch {
	case !ok:
		return nil
	case row.Token && errors.As(err, &se):
		return &Refusal{Kind: RefusalKind(row.Kind), Message: se.Error(), Scope: se.Scope, Presented: se.Presented, Current: se.Current}
	}
	return &Refusal{Kind: RefusalKind(row.Kind), Message: err.Error()}
}

// ResponseError returns the refusal of resp as an error, or nil if resp is
// not a refusal (the RefusalHeader is absent): the *Refusal ReadRefusal
// reads, so that errors.Is(err, fence.ErrStale) holds for a stale token and
// errors.As finds its *fence.StaleError. A refusal that cannot be read
// gives an error wrapping ErrInvalidRefusal and, when the header names a
// kind that has one, the kind's fencing error (fence.ErrStale, ...). It
// reads (but does not close) the body of a refusal.
func ResponseError(resp *http.Response) error {
	r, err := ReadRefusal(resp)
	switch {
	case err != nil && resp != nil:
		err = fmt.Errorf("%s: %w", statusText(resp.StatusCode), err)
		if k := kindError(RefusalKind(resp.Header.Get(RefusalHeader))); k != nil {
			err = fmt.Errorf("%w (%w)", err, k)
		}
		return err
	case err != nil:
		return err
	case r == nil:
		return nil
	}
	return r
}
