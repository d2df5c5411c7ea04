// Package core is backlog's application API and engine: the Client that
// enqueues and runs jobs, handlers and their outcomes, options, periodic
// jobs, events and middleware. Applications import this package and a
// store (store.Open, or store/sqlite, store/postgres, store/mysql,
// store/memory); backlogtest helps their tests.
//
// What a store author implements (the Store contract, its capabilities
// and rules) is package contract; the helpers stores share are package
// storekit. The job model and the errors applications check (Job, State,
// InsertParams, ErrNotFound…) are defined in contract and named here as
// aliases, so an application needs only this package. core imports no
// database driver; stores live under store/ and are proven by storetest.
//
// # Enqueueing
//
// Typed args implement Args (a Kind method) and are stored as JSON:
//
//	type EmailArgs struct{ To string `json:"to"` }
//	func (EmailArgs) Kind() string { return "email" }
//
//	res, err := client.Enqueue(ctx, EmailArgs{To: "a@example.com"}, &core.Options{Queue: "mail"})
//
// EnqueueMany writes many jobs in one store round trip, EnqueueTx inside the
// caller's transaction, and EnqueueArgsTx one typed job there. A job with a
// UniqueKey (or UniqueByArgs, a key from its kind and args) held by a live
// job is not inserted: the existing job comes back with Duplicate set.
//
// # Running
//
// Handlers are registered by type (Handle) or by kind name (HandleRaw). Per
// queue, a fetch loop claims only as many jobs as it has free slots (woken
// by its poll interval, by in-process enqueues and by store notifications),
// an execution runs each handler with middleware, timeout and panic
// recovery, and a completer writes outcomes in batches with one Finish call
// every few milliseconds. The handler's returned error picks the outcome:
// nil completes, Snooze, Cancel, Permanent and Continue steer, anything else
// retries with backoff (ExponentialBackoff, DelayList, RetryFunc) until
// MaxAttempts, then discards (the dead letter state).
//
// A heartbeat re-registers the worker and extends the leases of every job it
// holds in one statement; maintenance on every node rescues jobs whose lease
// expired, discards jobs past their deadline, prunes finished jobs and
// removes dead workers.
//
// Stop is a soft stop (no more claims, wait for running jobs) that becomes a
// hard stop when its context ends (handler contexts cancelled, unfinished
// jobs handed back without using an attempt).
//
// # Guarantees
//
// At-least-once: a job whose insert committed is never lost; it runs again
// only if its worker lost the lease, and fencing (worker id and claim
// sequence on every write) keeps the stale worker's outcome from applying.
// HandleTx makes a handler's own writes in the store's database commit
// with the job's outcome, or not at all (docs/transactions.md).
//
// # Testing
//
// Package backlogtest runs one job's handler synchronously and asserts
// what was enqueued, on the memory store or SQLite.
package core
