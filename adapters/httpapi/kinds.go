package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core"
)

// WorkerKindsKey is the metadata key of a remote worker's registry record
// that holds the kinds the worker announced when it registered
// (RegisterRequest.Kinds), as a JSON array of strings. GET /v1/workers
// shows them as the worker's kinds. A registration may not set it.
const WorkerKindsKey = "backlog.kinds"

// MaxWorkerKinds is the most kinds one registration may announce.
const MaxWorkerKinds = 1000

// MaxWorkerQueues is the most queues one registration may name, and so
// the most one claim may name or claim from: a claim reads the queues one
// after another, so the cap bounds the store time of every claim. A
// registration or claim naming more is refused with 400 invalid-request.
const MaxWorkerQueues = 1000

// kindsRefresh is how long the registry read by Config.RejectUnknownKinds
// is reused: a worker registered through another server sharing the store
// is seen within it (one registered here at once).
const kindsRefresh = time.Second

// kindsOf returns the kinds w announced, nil when none (or when the record
// holds no valid list).
func kindsOf(w core.WorkerInfo) []string {
	v, ok := w.Metadata[WorkerKindsKey]
	if !ok {
		return nil
	}
	var kinds []string
	if json.Unmarshal([]byte(v), &kinds) != nil {
		return nil
	}
	return kinds
}

// withKinds returns w announcing kinds (a copy; none removes the entry).
func withKinds(w core.WorkerInfo, kinds []string) core.WorkerInfo {
	md := maps.Clone(w.Metadata)
	delete(md, WorkerKindsKey)
	if len(kinds) > 0 {
		if md == nil {
			md = map[string]string{}
		}
		b, _ := json.Marshal(kinds)
		md[WorkerKindsKey] = string(b)
	}
	w.Metadata = md
	return w
}

// validQueues checks the queue names of a registration or claim (field
// names them in the message): at most MaxWorkerQueues, each a valid queue
// name (core.ValidateQueueName). The message quotes at most the first
// offending name, never the whole list.
func validQueues(field string, qs []string) error {
	if len(qs) > MaxWorkerQueues {
		return newProblem(SlugInvalidRequest, fmt.Sprintf("%s: %d queues, over the limit of %d", field, len(qs), MaxWorkerQueues))
	}
	for _, q := range qs {
		if err := core.ValidateQueueName(q); err != nil {
			return newProblem(SlugInvalidRequest, field+": "+trimInvalid(err.Error()))
		}
	}
	return nil
}

// validKinds checks the kinds of a registration and returns them sorted,
// without repeats.
func validKinds(kinds []string) ([]string, error) {
	if len(kinds) > MaxWorkerKinds {
		return nil, newProblem(SlugInvalidRequest, fmt.Sprintf("kinds: %d kinds, over the limit of %d", len(kinds), MaxWorkerKinds))
	}
	for _, k := range kinds {
		if k == "" || len(k) > core.MaxKindLen || !utf8.ValidString(k) {
			return nil, newProblem(SlugInvalidRequest, fmt.Sprintf("kinds: kind %q must be 1..%d bytes of UTF-8", k, core.MaxKindLen))
		}
	}
	if len(kinds) == 0 {
		return nil, nil
	}
	out := slices.Clone(kinds)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// kindRegistry is what Config.RejectUnknownKinds checks submissions
// against: the worker registry as last read (kindsRefresh at most ago).
type kindRegistry struct {
	mu      sync.Mutex
	read    time.Time // when workers was read; zero: read again
	workers []core.WorkerInfo
}

// forget makes the next check read the registry again (a worker
// registered or deregistered here).
func (k *kindRegistry) forget() {
	k.mu.Lock()
	k.read = time.Time{}
	k.mu.Unlock()
}

// checkKinds refuses, when Config.RejectUnknownKinds is set, a submission
// holding a job of a kind that neither the server's client has a handler
// for or declares (core.Handlers.Known) nor a live registered worker (not yet declared dead) announced:
// 422 unknown-kind naming the first such job and kind. prefixed names
// the item of a batch.
func (s *Server) checkKinds(ctx context.Context, ps []core.InsertParams, prefixed bool) error {
	if !s.cfg.RejectUnknownKinds {
		return nil
	}
	handlers := s.ccfg.Handlers
	var known map[string]bool
	for i, p := range ps {
		if handlers.Known(p.Kind) {
			continue
		}
		if known == nil {
			var err error
			if known, err = s.workerKinds(ctx); err != nil {
				return err
			}
		}
		if known[p.Kind] {
			continue
		}
		prefix := ""
		if prefixed {
			prefix = fmt.Sprintf("jobs[%d]: ", i)
		}
		return newProblem(SlugUnknownKind, fmt.Sprintf("%skind %q has no handler: neither this server nor any live registered worker handles it; nothing was inserted", prefix, p.Kind))
	}
	return nil
}

// workerKinds returns the kinds announced by the registered workers not
// declared dead at the server's now, reading the registry when the last
// read is older than kindsRefresh or was forgotten.
func (s *Server) workerKinds(ctx context.Context) (map[string]bool, error) {
	k := &s.kinds
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.read.IsZero() || time.Since(k.read) >= kindsRefresh {
		ws, err := s.c.ListWorkers(ctx)
		if err != nil {
			return nil, err
		}
		k.workers, k.read = ws, time.Now()
	}
	now := s.now()
	known := map[string]bool{}
	for _, w := range k.workers {
		if w.Liveness(now, s.ccfg.WorkerStaleAfter, s.ccfg.WorkerDeadAfter) == core.LivenessDead {
			continue
		}
		for _, kind := range kindsOf(w) {
			known[kind] = true
		}
	}
	return known, nil
}
