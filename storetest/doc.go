// Package storetest is the conformance suite for contract.Store implementations.
//
// A store — built in or written by a third party for a new database — proves
// that it means the same thing as every other store by passing one call:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Factory{
//			Strategies: []contract.ClaimStrategy{contract.StrategySkipLocked, contract.StrategyOptimistic},
//			New: func(t testing.TB, strategy contract.ClaimStrategy) contract.Store {
//				s, err := mystore.Open(t.Context(), dsnForAFreshSchema(t), mystore.WithStrategy(strategy))
//				if err != nil {
//					t.Fatal(err)
//				}
//				t.Cleanup(func() { s.Close() })
//				return s
//			},
//			// Only when the store implements contract.TxInserter or contract.TxCompleter:
//			BeginTx: func(t testing.TB, s contract.Store) (any, func() error, func() error) {
//				tx, err := s.(*mystore.Store).DB().BeginTx(t.Context(), nil)
//				if err != nil {
//					t.Fatal(err)
//				}
//				return tx, tx.Commit, tx.Rollback
//			},
//		})
//	}
//
// The suite is modelled on testing/slogtest and testing/fstest: every rule of
// the contract in core/contract/store.go is a named subtest ("claim/never-returns-
// future-jobs", "finish/stale-attempt-is-fenced", …), run once per claim
// strategy under "strategy=<name>", and a failure message says which rule was
// broken and what the store returned, so an adapter author can act on it
// without reading the suite. Run a single rule with, for example,
//
//	go test -run 'TestConformance/strategy=optimistic/claim/never-returns-future-jobs'
//
// # What the suite assumes
//
//   - Factory.New returns a fresh, empty, migrated store for every subtest,
//     and registers its own cleanup with t.Cleanup. Subtests do not share
//     jobs, queues, pauses or workers, and never run in parallel with each
//     other, so a store may reuse one database between subtests as long as
//     New empties it (for example a new schema per call).
//   - The store never reads a clock. The suite starts at a fixed "now"
//     (2030-01-02T03:04:05.123456Z) and advances it in code; the only real
//     waiting is for notifications, bounded at a few seconds.
//   - Optional capabilities are discovered by type assertion, as the engine
//     does: the transactional subtests run only when the store implements
//     contract.TxInserter or contract.TxCompleter (and then need Factory.BeginTx),
//     the notification subtests only when it implements contract.Notifier, the
//     settings subtests only when it implements contract.Settings, the
//     rewrite subtests only when it implements contract.SealedRewriter. A store
//     that declares a capability must deliver it: a Notifier that never
//     delivers fails, and so does a get-or-create that two racing callers
//     both win.
//   - When Factory.Reopen is set, the claim-exclusivity subtest puts half of
//     its concurrent claimers on a second handle, as a second process would,
//     and the settings subtests race and read across the two handles.
//
// Everything the suite checks is observable through contract.Store; it never
// inspects a database directly. Arguments are compared as JSON values (a
// store may normalise whitespace and key order), nil and empty tags or
// metadata are equal, and times must come back as the same instant, in UTC,
// at microsecond precision.
//
// The package imports only core and the standard library. Helpers that start
// real databases live in storetest/dbtest, so an adapter author who brings a
// database does not pull in Docker libraries.
package storetest
