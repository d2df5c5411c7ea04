// Package contract is what a store author implements: the Store interface
// that every database adapter satisfies, its optional capabilities
// (TxInserter, TxCompleter, TxRunner, Notifier, Settings, MutableSettings,
// SealedRewriter, Vacuumer, QueueHistory, Migrator, QueueLimiter,
// UniqueHolder, PageLister), the job model they store (Job, State,
// InsertParams, Outcome…), their parameters and results, and the sentinel
// errors they return. Every rule a store must keep is written in the doc
// comments here and proven by a named rule of package storetest.
//
// The split follows database/sql and database/sql/driver: applications
// import package core (the Client, handlers, options, events), which names
// the job model and the errors applications check as aliases of the types
// here; store authors import this package, package storekit (the helpers a
// store may use: the claim policy's ClaimRoom, setting and history checks,
// list paging) and storetest. This package imports only the standard
// library.
//
// Start with Store; docs/writing-a-store.md walks through writing one.
package contract
