package httpapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/backlogq/backlog/adapters/httpapi/apitypes"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// Encryption at rest through the API (docs/security.md). The server's
// client holds the keys (core.Config.Encryption): submitted args are
// sealed by the client's EnqueueMany, outcomes of remote workers are
// sealed here before the store writes them (as the engine's completer does
// for its own), and jobs are shown opened only to the roles listed in
// Config.OpenSealedFor.

// checkSubmittedArgs applies the rule for args a producer submits already
// sealed (docs/security.md, "Sealed args"). Args that are not an envelope
// pass. An envelope (a JSON object with a top-level "backlog_enc" member)
// is refused with a 400 problem when it is malformed, and also when
// Config.AcceptSealedArgs is off: a producer could otherwise submit a copy
// of another job's sealed args, which run with that job's plaintext. With
// AcceptSealedArgs on, a server holding keys also refuses an envelope that
// does not open for kind (another kind's, or a key it lacks). prefix names
// the item in messages ("" or "jobs[3]: ").
func (s *Server) checkSubmittedArgs(kind string, args []byte, prefix string) error {
	sealed, err := contract.CheckSealed(args)
	switch {
	case !sealed:
		return nil
	case err != nil:
		return newProblem(SlugInvalidRequest, fmt.Sprintf("%sargs: %v (an object with a top-level %q member is a sealed envelope)", prefix, err, "backlog_enc"))
	case !s.cfg.AcceptSealedArgs:
		return newProblem(SlugInvalidRequest, prefix+"args are sealed (a top-level \"backlog_enc\" member): this server does not accept args sealed by producers; submit them in clear (a server with keys seals them) or start it with --accept-sealed-args")
	}
	if enc := s.encryption(); enc != nil {
		if _, err := enc.Keys.OpenArgs(kind, args); err != nil {
			return newProblem(SlugInvalidRequest, fmt.Sprintf("%ssealed args do not open for kind %q with this server's keys: %v", prefix, kind, err))
		}
	}
	return nil
}

// parseOpenSealedFor reads Config.OpenSealedFor.
func parseOpenSealedFor(spec string) (role, error) {
	if spec == "" {
		spec = DefaultOpenSealedFor
	}
	if strings.TrimSpace(spec) == "none" {
		return 0, nil
	}
	var r role
	for _, name := range strings.Split(spec, ",") {
		switch strings.TrimSpace(name) {
		case "producer":
			r |= roleProducer
		case "worker":
			r |= roleWorker
		case "admin":
			r |= roleAdmin
		default:
			return 0, fmt.Errorf("httpapi: OpenSealedFor: %q is not a role (producer, worker, admin) or none", strings.TrimSpace(name))
		}
	}
	return r, nil
}

// CheckOpenSealedFor returns the error New would return for
// Config.OpenSealedFor spec (a name that is not a role), or nil; a command
// line checks its flag with it before starting anything.
func CheckOpenSealedFor(spec string) error {
	_, err := parseOpenSealedFor(spec)
	return err
}

// encryption returns the keys of the server's client, or nil.
func (s *Server) encryption() *core.Encryption { return s.ccfg.Encryption }

// apiJob converts j to its API form for the request's caller: with sealed
// values opened when the caller's roles may read them and the server
// holds their keys, as stored otherwise. Values that do not open (a key
// the server lacks, altered data) stay sealed; nil stays nil.
func (s *Server) apiJob(ctx context.Context, j *core.Job) *Job {
	enc := s.encryption()
	if j == nil || enc == nil || reqFrom(ctx).roles&s.opens == 0 {
		return apitypes.FromCore(j)
	}
	opened, _ := enc.Keys.OpenJob(j)
	return apitypes.FromCore(opened)
}

// sealOutcome seals what a remote worker's outcome writes, as the engine
// seals its own (core.Encryption.SealOutcome); kind is the job's kind.
func (s *Server) sealOutcome(o *contract.Outcome, kind string) {
	s.encryption().SealOutcome(o, kind)
}

// sealsResults reports whether completions' results are sealed before
// they are stored (so their job's kind is needed).
func (s *Server) sealsResults() bool {
	enc := s.encryption()
	return enc != nil && enc.Results
}
