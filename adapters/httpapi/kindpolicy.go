package httpapi

import (
	"net/http"

	"github.com/backlogq/backlog/core"
)

// KindList is the answer of GET /v1/kinds: the policy of every kind the
// server's client knows (its handlers' and its declared kinds: the kinds
// of its config file's handlers and retry_by_kind), in kind order, and
// the policy of any other kind (core.Client.KindPolicies).
type KindList struct {
	Kinds   []core.KindPolicy `json:"kinds"`
	Unknown core.KindPolicy   `json:"unknown"`
}

func (s *Server) listKinds(w http.ResponseWriter, r *http.Request) error {
	kinds, unknown := s.c.KindPolicies()
	writeJSON(w, http.StatusOK, KindList{Kinds: kinds, Unknown: unknown})
	return nil
}
