// Package backlogtest helps applications test their own code that uses
// backlog: the code that enqueues jobs, and the handlers that run them.
// It plays the part of River's rivertest or Oban.Testing.
//
//   - Assertions on what was enqueued: RequireEnqueued,
//     RequireNotEnqueued and RequireManyEnqueued read a store (any
//     contract.Store, or a Lister of your own) and fail the test with the
//     jobs they did find. Args are matched as a JSON subset.
//   - Running a handler through the engine: Work enqueues a job and runs
//     it at once, WorkJob runs a job already enqueued. Both go through
//     core.Client.WorkJob, so middleware, timeouts, the retry policy,
//     Snooze, Cancel, Permanent, Continue and the outcome written to the
//     store are the engine's own, on a client that is never started.
//   - A Clock to pass as core.Config.Clock: Set and Advance it to make
//     scheduled and retried jobs due without sleeping.
//
// The kit works on every store; store/memory needs no setup, and
// store/sqlite on a file in t.TempDir() tests against SQL. See
// docs/testing.md.
package backlogtest
