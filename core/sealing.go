package core

import (
	"errors"
	"slices"

	"github.com/backlogq/backlog/core/contract"
)

// This file holds what every runner of jobs shares about encryption at
// rest: the in-process executor, the HTTP API writing remote workers'
// outcomes, and the remote worker (adapters/httpapi/client) all call these,
// so that a job sealed by one opens and seals the same way in the others.

var errPlainArgs = errors.New("args are not sealed and this worker requires sealed args (Encryption.RequireSealed)")

// OpenForHandler returns the job a handler sees: args opened (plain args
// as they are, unless RequireSealed), and error texts opened where the
// keys open them; job itself is not changed. A nil *Encryption passes
// plain args through and fails on sealed ones. Sealed args that do not
// open (no keyring, unknown key id, altered data) return job and a
// *DecryptError: the attempt then fails like any other, and the job is
// retried and finally discarded, never dropped.
func (e *Encryption) OpenForHandler(job *Job) (*Job, error) {
	var k *Keyring
	if e != nil {
		k = e.Keys
	}
	args, err := k.OpenArgs(job.Kind, job.Args)
	if err != nil {
		return job, err
	}
	if k == nil {
		return job, nil
	}
	if e.RequireSealed && !contract.IsSealed(job.Args) {
		return job, &DecryptError{Field: FieldArgs, Kind: job.Kind, Err: errPlainArgs}
	}
	hj := *job
	hj.Args = args
	cloned := false
	for i, ae := range job.Errors {
		if !contract.IsSealedText(ae.Error) && !contract.IsSealedText(ae.Trace) {
			continue
		}
		if !cloned {
			hj.Errors, cloned = slices.Clone(job.Errors), true
		}
		if o, err := k.OpenAttemptError(ae); err == nil {
			hj.Errors[i] = o
		}
	}
	return &hj, nil
}

// SealOutcome seals in place what o writes: a continuation's next args
// (for its next kind) always, the result when Results is set and the
// error entry's text when Errors is set; kind is the job's current kind.
// Values already sealed are kept as they are (a remote worker holding
// keys may have sealed them). A nil *Encryption does nothing.
func (e *Encryption) SealOutcome(o *contract.Outcome, kind string) {
	if e == nil {
		return
	}
	if o.Kind == contract.OutcomeContinue {
		o.NextArgs = e.Keys.SealArgs(o.NextKind, o.NextArgs)
	}
	if e.Results && o.Result != nil {
		o.Result = e.Keys.SealResult(kind, o.Result)
	}
	if e.Errors && o.Error != nil {
		ae := e.Keys.SealAttemptError(*o.Error)
		o.Error = &ae
	}
}

// SealedSize returns the most bytes the sealed form (SealResult,
// SealArgs) of a value of n bytes takes, under a key id of the longest
// allowed length: base64 of the value plus 28 bytes of nonce and tag,
// inside the JSON envelope. Limits on values that may arrive sealed (a
// remote worker's result) use it in place of n.
func SealedSize(n int) int {
	return len(`{"backlog_enc":1,"kid":"`) + contract.MaxKeyIDLen + len(`","ct":"`) + base64Len(n+gcmOverhead) + len(`"}`)
}

const (
	gcmOverhead   = 12 + 16 // nonce and tag
	truncatedMark = "…[truncated]"
)

func base64Len(n int) int { return (n + 2) / 3 * 4 } // padded standard base64
