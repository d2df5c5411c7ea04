// Package storekit holds what every store shares so that no store writes
// policy of its own: ClaimRoom, the claim-policy algorithm (concurrency
// limits, rate limits, fair turns and priority aging) a store feeds with
// candidates and applies; the checks of settings, history samples and
// unique-hold pages a store runs before writing; the merge of history
// samples; and paging by bytes (CutPage, JobWeight).
//
// It imports package contract only. A store imports contract, storekit
// and, in its tests, storetest.
package storekit
