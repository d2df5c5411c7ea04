// Package httpapi serves backlog's REST API (v1) over a core.Client: an
// http.Handler for producers (submit, list, get jobs), remote workers
// (register, heartbeat, long-poll claim, and fenced outcomes with lease
// tokens, one job at a time or in batches of up to 1000 with one store
// write) and administrators (cancel, retry, delete, pause, resume, list
// workers), with RFC 9457 problem+json errors, bearer-token roles and
// correlation ids. docs/http-api.md is the user's reference; openapi.json
// (served at GET /v1/openapi.json) describes every route.
//
//	srv, err := httpapi.New(client, httpapi.Config{Tokens: httpapi.Tokens{Admin: "…"}})
//	defer srv.Close()
//	http.ListenAndServe(":8080", srv)
//
// Remote workers run jobs outside this process, not outside the engine:
// the server validates through core (NewInsertRaw, Client.EnqueueMany)
// and claims, extends leases, applies outcomes, hands jobs back and keeps
// the worker registry through core.RemoteWorkers (Client.RemoteWorkers),
// which decides outcomes as the engine decides its own (the kind's retry
// policy, core.Decide) and reports the same events to observers (metrics,
// logs, tracing). The server keeps transport, authentication, lease tokens
// and request validation.
package httpapi
