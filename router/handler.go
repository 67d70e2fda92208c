package router

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/internal/nilness"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router/internal/admit"
	"github.com/tenure-go/tenure/router/internal/spans"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// KeyFunc extracts the routing key from a request. It must not consume the
// request's body. An error is answered with 400 Bad Request and the error's
// text.
type KeyFunc func(r *http.Request) (string, error)

// KeyFromPathValue returns a KeyFunc that reads the path wildcard name set
// by http.ServeMux (for a pattern such as "/items/{id}"). An empty value is
// an error wrapping ErrNoKey.
func KeyFromPathValue(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		if k := r.PathValue(name); k != "" {
			return k, nil
		}
		return "", fmt.Errorf("%w: path value %q is empty", ErrNoKey, name)
	}
}

// KeyFromHeader returns a KeyFunc that reads the request header name. An
// empty value is an error wrapping ErrNoKey.
func KeyFromHeader(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		if k := r.Header.Get(name); k != "" {
			return k, nil
		}
		return "", fmt.Errorf("%w: header %q is empty", ErrNoKey, name)
	}
}

// Handler routes each request by the key that Key extracts, for one
// node's Router:
//
//   - If this node owns the key's partition, Local serves the request,
//     counted as in flight like Do's work, with a context that carries the
//     fencing token (fence.FromContext) and ends when the client goes away
//     or the tenure ends, and with the token in the httpfence.Header
//     request header (and its signature, when the node signs, in
//     httpfence.SignatureHeader). A partition in handoff is waited for as in Do. Local
//     answers the failures of its fenced writes with WriteError, so that a
//     write refused because the tenure ended is retried at the new owner.
//   - If another node owns it (or is about to, when this node is handing
//     the partition off) and the request has not been forwarded, the
//     request is forwarded to the owner once, with the Tenure-Forwarded
//     header set to this node's ID and Tenure-Ring-Version to this node's
//     ring version
//     (and what Config.Rewrite adds, such as an identity).
//     Bodies stream both ways; the client's cancellation or timeout ends the
//     forwarded request.
//   - Otherwise the router answers with a refusal in httpfence's wire format
//     (httpfence.WriteRefusal) carrying the hint of the partition's owner:
//     not-owner (421) for a forwarded request that lands on a non-owner,
//     which is never forwarded again; handoff (503) while the partition
//     moves, while no owner with an address is known, when the request's
//     context ends during the handoff wait, or when the owner cannot be
//     reached; session-lost (503) when this node has lost its session or
//     is closed. Every one of them is retryable; Client retries them.
//
// A Handler is safe for concurrent use. Its fields must not change once it
// serves; Router.Handler builds one and refuses nil fields. A Handler with a
// nil field answers every request with httpfence.RefusalUnavailable.
type Handler struct {
	// Router routes the requests.
	Router *Router
	// Key extracts each request's routing key.
	Key KeyFunc
	// Local serves the requests whose partition this node owns.
	Local http.Handler
}

// Handler returns the Handler that routes requests by key through r to
// local on their owner. It returns an error wrapping ErrNilArgument if key
// or local is nil, a typed nil included.
func (r *Router) Handler(key KeyFunc, local http.Handler) (*Handler, error) {
	if key == nil {
		return nil, fmt.Errorf("%w: key function", ErrNilArgument)
	}
	if nilness.Is(local) {
		return nil, fmt.Errorf("%w: local handler %T", ErrNilArgument, local)
	}
	return &Handler{Router: r, Key: key, Local: local}, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if h == nil || h.Router == nil || h.Key == nil || nilness.Is(h.Local) {
		_ = httpfence.WriteRefusal(w, hintRefusal(httpfence.RefusalUnavailable, "", nil,
			"the handler has no router, key function or local handler"))
		return
	}
	key, err := h.Key(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r := h.Router
	req, sp := r.startServe(req)
	defer spans.End(sp, nil)
	if r.closed.Load() {
		kind := admit.Decide(admit.Situation{Self: r.id, Closed: true})
		r.refuse(w, sp, hintRefusal(httpfence.RefusalKind(kind), r.id, nil, "closed"))
		return
	}
	held, hint, err := r.hold(req.Context(), key)
	if err == nil {
		defer held.Release()
		ctx := admit.WorkContext(req.Context(), held, routedKey{}, &routed{r: r, key: key, caller: req.Context()})
		defer ctx.Release()
		req = req.WithContext(ctx)
		sig, _ := fence.SignatureFromContext(ctx)
		_ = httpfence.SetHeader(req.Header, held.Token, sig) // a held token is valid
		r.served.Add(1)
		spans.Set(sp, spans.Partition.Int(held.Partition), spans.Epoch.Int64(held.Token.Epoch))
		h.Local.ServeHTTP(w, req)
		return
	}
	fwd, ref := r.route(req.Context(), hint, err, len(req.Header.Values(headerForwarded)) > 0)
	if ref != nil {
		r.refuse(w, sp, ref)
		return
	}
	r.forwarded.Add(1)
	spans.Event(sp, spans.EventForward, spans.Owner.String(fwd.Owner), spans.Partition.Int(fwd.Partition), spans.Epoch.Int64(fwd.Epoch))
	ctx := context.WithValue(req.Context(), forwardKey{}, fwd)
	r.proxy.ServeHTTP(w, req.WithContext(ctx))
}

// route decides what becomes of a request that this node does not serve,
// given hold's error and hint we: forward it to fwd, or answer ref.
// forwarded reports that the request was forwarded to this node; ctx is
// the request's. A request that has not been forwarded goes to another
// node that owns it; any other gets the refusal admit.Decide chooses.
func (r *Router) route(ctx context.Context, we *ownership.WrongOwnerError, err error, forwarded bool) (fwd *ownership.WrongOwnerError, ref *httpfence.Refusal) {
	if ctx.Err() == nil && !forwarded && r.elsewhere(we) {
		return we, nil
	}
	kind := httpfence.RefusalKind(admit.Decide(admit.Situation{Self: r.id, Caller: ctx, Err: err, Hint: we}))
	switch {
	case ctx.Err() != nil:
		ref := hintRefusal(kind, r.id, we, "")
		ref.Message = "router: the request ended while waiting for the handoff: " + strings.TrimPrefix(ref.Message, "router: ")
		return nil, ref
	case kind == httpfence.RefusalSessionLost:
		return nil, hintRefusal(kind, r.id, we, err.Error())
	}
	return nil, hintRefusal(kind, r.id, we, "")
}

// refuse answers a request the router does not serve or forward, and
// counts it (and records it on sp, the request's span).
func (r *Router) refuse(w http.ResponseWriter, sp trace.Span, ref *httpfence.Refusal) {
	r.refused.Add(1)
	refused(sp, ref)
	_ = httpfence.WriteRefusal(w, ref)
}

// forwardKey is the context key of the *ownership.WrongOwnerError naming the target
// of a forwarded request.
type forwardKey struct{}

// rewrite prepares a forwarded request for the ReverseProxy, with
// Config.Rewrite's additions.
func (r *Router) rewrite(pr *httputil.ProxyRequest) {
	we, _ := pr.In.Context().Value(forwardKey{}).(*ownership.WrongOwnerError)
	if we == nil {
		return // unreachable: only ServeHTTP calls the proxy
	}
	r.target(pr, we)
	pr.SetXForwarded()
	if r.cfg.Rewrite != nil {
		r.cfg.Rewrite(pr)
		r.target(pr, we)
	}
}

// target points pr at we's node and sets the router's headers.
func (r *Router) target(pr *httputil.ProxyRequest, we *ownership.WrongOwnerError) {
	pr.Out.URL.Scheme = r.cfg.Scheme
	pr.Out.URL.Host = we.Addr
	pr.Out.Header.Del(httpfence.Header)
	pr.Out.Header.Del(httpfence.SignatureHeader)
	pr.Out.Header.Set(headerForwarded, r.id) // a request that carries it is never forwarded: this is its one hop
	pr.Out.Header.Set(headerRingVersion, strconv.FormatUint(we.RingVersion, 10))
	r.trace.Inject(pr.In.Context(), propagation.HeaderCarrier(pr.Out.Header))
}

// forwardError answers a request whose forwarding failed: the owner could
// not be reached (it may or may not have received the request), which
// admit.Decide refuses as a handoff naming that owner.
func (r *Router) forwardError(w http.ResponseWriter, req *http.Request, err error) {
	we, _ := req.Context().Value(forwardKey{}).(*ownership.WrongOwnerError)
	if req.Context().Err() == nil {
		r.log.Debug("forward failed", "owner", ownerOf(we), "error", err)
	}
	kind := admit.Decide(admit.Situation{Self: r.id, Caller: req.Context(), Err: err, Hint: we, Unreachable: true})
	ref := hintRefusal(httpfence.RefusalKind(kind), r.id, we, "forward to the owner failed: "+err.Error())
	if r.trace != nil {
		refused(trace.SpanFromContext(req.Context()), ref)
	}
	_ = httpfence.WriteRefusal(w, ref)
}

func ownerOf(we *ownership.WrongOwnerError) string {
	if we == nil {
		return ""
	}
	return we.Owner
}
