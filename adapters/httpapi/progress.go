package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// ProgressRequest is the body of POST /v1/jobs/{id}/progress: what the
// execution the lease token names reports of itself. At least one of
// Percent and Checkpoint must be set.
type ProgressRequest struct {
	LeaseToken string `json:"lease_token"`
	// Percent (0..100) and Message (at most core.MaxProgressMessageLen
	// bytes) replace the job's progress, stamped with the server's time;
	// without Percent the progress is left as it is (Message then must be
	// empty).
	Percent *float64 `json:"percent,omitempty"`
	Message string   `json:"message,omitempty"`
	// Checkpoint (any JSON value, at most core.MaxCheckpointBytes)
	// replaces the job's checkpoint, which the job's next attempt
	// receives; null clears it; absent leaves it as it is.
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
}

// ProgressResponse answers POST /v1/jobs/{id}/progress with what the job
// now holds.
type ProgressResponse struct {
	Progress   *core.Progress  `json:"progress,omitempty"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
}

// recordProgress writes a remote worker's progress report and checkpoint
// through the engine (core.RemoteWorkers.RecordProgress), fenced by the
// lease token's execution like an outcome: 409 lease-lost when it no
// longer holds the job, 400 invalid-request for values out of bounds.
func (s *Server) recordProgress(w http.ResponseWriter, r *http.Request) error {
	var req ProgressRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	u := contract.ProgressUpdate{}
	if req.Percent != nil {
		u.Progress = &core.Progress{Percent: *req.Percent, Message: req.Message, At: s.now()}
	} else if req.Message != "" {
		return newProblem(SlugInvalidRequest, "message needs percent")
	}
	if req.Checkpoint != nil {
		u.Checkpoint = req.Checkpoint
	}
	if err := u.Validate(); err != nil {
		return newProblem(SlugInvalidRequest, progressDetail(err))
	}
	tok, j, err := s.held(r.Context(), r, req.LeaseToken)
	if err != nil {
		return err
	}
	u.JobID, u.WorkerID, u.ClaimSeq = j.ID, tok.workerID, tok.claimSeq
	if err := s.rw.RecordProgress(r.Context(), u); err != nil {
		if errors.Is(err, core.ErrLeaseLost) {
			return lostProblem(j)
		}
		return err
	}
	resp := ProgressResponse{Progress: u.Progress, Checkpoint: j.Checkpoint}
	if u.Checkpoint != nil {
		resp.Checkpoint = u.Checkpoint
		if contract.IsNullJSON(u.Checkpoint) {
			resp.Checkpoint = nil
		}
	}
	if resp.Progress == nil {
		resp.Progress = j.Progress
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// progressDetail is a validation error's message without its job id
// (the request named none yet) and sentinel.
func progressDetail(err error) string {
	msg := strings.TrimPrefix(err.Error(), "job 0: ")
	return strings.TrimSuffix(msg, ": "+contract.ErrInvalidArgument.Error())
}
