package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"strconv"

	"github.com/tenure-go/tenure/ownership"
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

// KeyFromQuery returns a KeyFunc that reads the query parameter name. An
// empty value is an error wrapping ErrNoKey.
func KeyFromQuery(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		if k := r.URL.Query().Get(name); k != "" {
			return k, nil
		}
		return "", fmt.Errorf("%w: query parameter %q is empty", ErrNoKey, name)
	}
}

// Handler returns an http.Handler that routes each request by the key that
// key extracts:
//
//   - If this node owns the key's partition, local serves the request,
//     counted as in flight like Do's work, with a context that carries the
//     fencing token (fence.FromContext) and ends when the client goes away
//     or the tenure ends, and with the token in the HeaderFenceToken
//     request header. A partition in handoff is waited for as in Do.
//   - If another node owns it and the request has not been forwarded, the
//     request is forwarded to the owner once, with HeaderForwarded set to
//     this node's ID and HeaderRingVersion to this node's ring version.
//     Bodies stream both ways; the client's cancellation or timeout ends the
//     forwarded request. If the owner cannot be reached the answer is 502
//     Bad Gateway with the hint headers.
//   - If the request was already forwarded (it carries HeaderForwarded), it
//     is never forwarded again: the answer is 421 Misdirected Request with
//     the hint headers HeaderOwner, HeaderOwnerAddr, HeaderEpoch,
//     HeaderPartition and HeaderRingVersion.
//   - If no owner with an address is known, or the node is closing, the
//     answer is 503 Service Unavailable with Retry-After and the hint
//     headers.
//
// Every answer the router produces itself carries HeaderRouteError. key and
// local must not be nil; if one is, every request is answered 500.
func (r *Router) Handler(key KeyFunc, local http.Handler) http.Handler {
	return &handler{r: r, key: key, local: local}
}

type handler struct {
	r     *Router
	key   KeyFunc
	local http.Handler
}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if h.key == nil || h.local == nil {
		http.Error(w, "router: handler has no key function or local handler", http.StatusInternalServerError)
		return
	}
	key, err := h.key(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r := h.r
	if r.closed.Load() {
		r.refuse(w, http.StatusServiceUnavailable, RouteErrorClosed, nil)
		return
	}
	held, err := r.hold(req.Context(), key)
	if err == nil {
		defer held.Release()
		ctx, cancel := workContext(req.Context(), held)
		defer cancel()
		req = req.WithContext(ctx)
		req.Header.Set(HeaderFenceToken, held.Token.String())
		r.served.Add(1)
		h.local.ServeHTTP(w, req)
		return
	}
	if errors.Is(err, ownership.ErrClosed) {
		r.refuse(w, http.StatusServiceUnavailable, RouteErrorClosed, nil)
		return
	}
	we := r.wrongOwner(key, err)
	switch {
	case req.Context().Err() != nil:
		r.refuse(w, http.StatusServiceUnavailable, RouteErrorTimeout, we)
	case len(req.Header.Values(HeaderForwarded)) > 0:
		r.refuse(w, http.StatusMisdirectedRequest, RouteErrorNotOwner, we)
	case we.Owner == "" || we.Addr == "" || we.Owner == r.id:
		r.refuse(w, http.StatusServiceUnavailable, RouteErrorNoOwner, we)
	default:
		r.forwarded.Add(1)
		ctx := context.WithValue(req.Context(), forwardKey{}, we)
		r.proxy.ServeHTTP(w, req.WithContext(ctx))
	}
}

// refuse answers a request the router does not serve or forward, and
// counts it.
func (r *Router) refuse(w http.ResponseWriter, status int, kind string, we *ownership.WrongOwnerError) {
	r.refused.Add(1)
	writeRouteError(w, status, kind, we)
}

// forwardKey is the context key of the *ownership.WrongOwnerError naming the target
// of a forwarded request.
type forwardKey struct{}

// rewrite prepares a forwarded request for the ReverseProxy.
func (r *Router) rewrite(pr *httputil.ProxyRequest) {
	we, _ := pr.In.Context().Value(forwardKey{}).(*ownership.WrongOwnerError)
	if we == nil {
		return // unreachable: only ServeHTTP calls the proxy
	}
	pr.Out.URL.Scheme = r.cfg.Scheme
	pr.Out.URL.Host = we.Addr
	pr.SetXForwarded()
	pr.Out.Header.Del(HeaderFenceToken)
	pr.Out.Header.Add(HeaderForwarded, r.id) // Add: a second hop, were there one, would show
	pr.Out.Header.Set(HeaderRingVersion, strconv.FormatUint(we.RingVersion, 10))
}

// forwardError answers a request whose forwarding failed.
func (r *Router) forwardError(w http.ResponseWriter, req *http.Request, err error) {
	we, _ := req.Context().Value(forwardKey{}).(*ownership.WrongOwnerError)
	if req.Context().Err() == nil {
		r.log.Debug("forward failed", "owner", ownerOf(we), "error", err)
	}
	writeRouteError(w, http.StatusBadGateway, RouteErrorForward, we)
}

func ownerOf(we *ownership.WrongOwnerError) string {
	if we == nil {
		return ""
	}
	return we.Owner
}

// writeRouteError writes an answer produced by the router itself.
func writeRouteError(w http.ResponseWriter, status int, kind string, we *ownership.WrongOwnerError) {
	h := w.Header()
	if we != nil {
		writeHint(h, we)
	}
	h.Set(HeaderRouteError, kind)
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	msg := "router: " + kind
	if we != nil {
		msg = we.Error()
	}
	_, _ = fmt.Fprintln(w, msg)
}
