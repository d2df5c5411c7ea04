package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/backlogq/backlog/core"
)

// PeriodicList is the answer of GET /v1/periodic: the periodic jobs of
// the server's client (core.Config.Periodic) in name order.
type PeriodicList struct {
	Periodic []core.PeriodicStatus `json:"periodic"`
}

// PeriodicResponse answers POST /v1/periodic/{name}/pause and /resume:
// the schedule's status after the change.
type PeriodicResponse struct {
	PeriodicJob core.PeriodicStatus `json:"periodic_job"`
}

func (s *Server) listPeriodic(w http.ResponseWriter, r *http.Request) error {
	list, err := s.c.PeriodicJobs(r.Context())
	if err != nil {
		return err
	}
	if list == nil {
		list = []core.PeriodicStatus{}
	}
	writeJSON(w, http.StatusOK, PeriodicList{Periodic: list})
	return nil
}

func (s *Server) pausePeriodic(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := s.c.PausePeriodic(r.Context(), name); err != nil {
		return periodicProblem(name, err)
	}
	return s.writePeriodic(w, r, name)
}

func (s *Server) resumePeriodic(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := s.c.ResumePeriodic(r.Context(), name); err != nil {
		return periodicProblem(name, err)
	}
	return s.writePeriodic(w, r, name)
}

// runPeriodic enqueues one job of the schedule now and answers as POST
// /v1/jobs does: 201 with {"job": …, "duplicate": false}.
func (s *Server) runPeriodic(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	res, err := s.c.RunPeriodicNow(r.Context(), name)
	if err != nil {
		return periodicProblem(name, err)
	}
	if res.Job != nil && !res.Duplicate && !res.Job.RunAt.After(s.now()) {
		s.wake.broadcast()
	}
	status := http.StatusCreated
	if res.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, SubmitResponse{Job: s.apiJob(r.Context(), res.Job), Duplicate: res.Duplicate})
	return nil
}

// writePeriodic answers {"periodic_job": <status>} for name, read back
// from the store.
func (s *Server) writePeriodic(w http.ResponseWriter, r *http.Request, name string) error {
	list, err := s.c.PeriodicJobs(r.Context())
	if err != nil {
		return err
	}
	for _, p := range list {
		if p.Name == name {
			writeJSON(w, http.StatusOK, PeriodicResponse{PeriodicJob: p})
			return nil
		}
	}
	return newProblem(SlugPeriodicNotFound, fmt.Sprintf("no periodic job is named %q", name))
}

// periodicProblem maps the errors of the periodic job calls of core.
func periodicProblem(name string, err error) error {
	switch {
	case errors.Is(err, core.ErrUnknownPeriodic):
		return newProblem(SlugPeriodicNotFound, fmt.Sprintf("no periodic job is named %q", name))
	case errors.Is(err, core.ErrUnsupported):
		return &problem{slug: SlugNotSupported, detail: "the job store keeps no settings (contract.MutableSettings), so periodic jobs cannot be paused or resumed through it", cause: err}
	}
	return err
}
