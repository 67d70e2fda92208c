package main

import (
	"fmt"
	"net/http"

	"github.com/tenure-go/tenure/examples/internal/app"
)

// handler serves the process's HTTP endpoints:
//
//	/metrics  Prometheus metrics (the scheduler's own registry)
//	/healthz  200 while the process runs
//	/readyz   200 while the process is a candidate with a live etcd
//	          session (the body says whether it leads), 503 otherwise
func handler(m *metrics, st *status) http.Handler {
	mux := http.NewServeMux()
	app.Handle(mux, m.reg) // /metrics, /healthz
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ready, role := st.get()
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, role)
	})
	return mux
}
