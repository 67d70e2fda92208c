package main

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/tenure-go/tenure/examples/internal/app"
	"github.com/tenure-go/tenure/examples/internal/counterdb"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
)

// answer is the JSON body of a counter's answers.
type answer struct {
	Key       string `json:"key"`
	Value     int64  `json:"value"`
	Duplicate bool   `json:"duplicate,omitempty"` // the idempotency key had been applied: this is its stored result
	Partition int    `json:"partition"`
	Epoch     int64  `json:"epoch"`
	Node      string `json:"node"`
}

// service is the counter's local HTTP handler: the router calls it only for
// keys whose partition this node serves, with the partition's token in the
// request's context.
type service struct {
	node  string
	store *counterdb.Store
	com   *counterdb.Committer
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, ok := fence.FromContext(r.Context())
	if !ok {
		http.Error(w, "no fencing token", http.StatusInternalServerError)
		return
	}
	key := r.PathValue("key")
	part, err := s.store.Serve(r.Context(), tok, key)
	if err != nil {
		fail(w, r, err)
		return
	}
	a := answer{Key: key, Partition: part.Number(), Epoch: tok.Epoch, Node: s.node}
	switch r.Method {
	case http.MethodGet:
		if err := part.Failure(); err != nil {
			fail(w, r, err)
			return
		}
		a.Value = part.Value(key)
	case http.MethodPost:
		idem := r.Header.Get(router.HeaderIdempotencyKey)
		if idem == "" {
			http.Error(w, "an increment needs an "+router.HeaderIdempotencyKey+" header", http.StatusBadRequest)
			return
		}
		res := s.com.Submit(part, key, idem, 1)
		if res.Err != nil {
			fail(w, r, res.Err)
			return
		}
		a.Value, a.Duplicate = res.Value, res.Dup
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a)
}

// fail answers err: the retryable refusal if the tenure ended (a stale
// token, a moved or lost partition), 422 for an idempotency key reused for
// another counter, 500 otherwise.
func fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, counterdb.ErrKeyReused) {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	if !router.WriteError(w, r, err) {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// handler serves the process's HTTP endpoints:
//
//	POST /counters/{key}/incr  increment (Idempotency-Key header required)
//	GET  /counters/{key}       read
//	/metrics                   Prometheus metrics (the counter's own registry)
//	/healthz                   200 while the process runs
//	/readyz                    200 when this node serves every partition the ring gives it (Node.HealthHandler)
//	/livez                     200 while this node's session is valid
func handler(rt *router.Router, node *ownership.Node, svc *service, m *counterdb.Metrics) (http.Handler, error) {
	h, err := rt.Handler(router.KeyFromPathValue("key"), svc)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /counters/{key}/incr", h)
	mux.Handle("GET /counters/{key}", h)
	app.Handle(mux, m.Registry)    // /metrics, /healthz
	health := node.HealthHandler() // /livez and /readyz, with a JSON body
	mux.Handle("GET /readyz", health)
	mux.Handle("GET /livez", health)
	return mux, nil
}
