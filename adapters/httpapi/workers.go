package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// Worker is a remote worker's registry record as the API shows it.
// Liveness is judged at the server's now with the client's
// WorkerStaleAfter and WorkerDeadAfter.
type Worker struct {
	ID   string `json:"id"`
	Name string `json:"name"` // stored as core.WorkerInfo.Host
	// PID is the process id in the record (in-process workers); 0,
	// omitted, for remote workers, which register none.
	PID    int      `json:"pid,omitempty"`
	Queues []string `json:"queues"`
	Tags   []string `json:"tags,omitempty"`
	// Kinds are the kinds the worker announced when it registered,
	// sorted (stored in its metadata under WorkerKindsKey, which Metadata
	// does not show).
	Kinds       []string          `json:"kinds,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	StartedAt   time.Time         `json:"started_at"`
	HeartbeatAt time.Time         `json:"heartbeat_at"`
	Liveness    core.Liveness     `json:"liveness"`
}

func (s *Server) toWorker(w core.WorkerInfo, now time.Time) Worker {
	qs := w.Queues
	if qs == nil {
		qs = []string{}
	}
	md := w.Metadata
	if _, ok := md[WorkerKindsKey]; ok {
		md = maps.Clone(md)
		delete(md, WorkerKindsKey)
		if len(md) == 0 {
			md = nil
		}
	}
	return Worker{
		ID: w.ID, Name: w.Host, PID: w.PID, Queues: qs, Tags: w.Tags, Kinds: core.WorkerKinds(w), Metadata: md,
		StartedAt: utc(w.StartedAt), HeartbeatAt: utc(w.HeartbeatAt),
		Liveness: w.Liveness(now, s.ccfg.WorkerStaleAfter, s.ccfg.WorkerDeadAfter),
	}
}

// RegisterRequest is the body of PUT /v1/workers/{id}.
type RegisterRequest struct {
	Name   string   `json:"name"`
	Queues []string `json:"queues"` // required, at least one
	Tags   []string `json:"tags,omitempty"`
	// Kinds are the job kinds the worker handles (at most MaxWorkerKinds,
	// each 1..255 bytes of UTF-8). The server accepts submissions of
	// these kinds while the worker lives (its unknown-kind rule,
	// core.Client.CheckKinds); they change nothing else.
	Kinds    []string          `json:"kinds,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// RegisterResponse answers PUT /v1/workers/{id}: the record and the
// intervals the worker should keep (in seconds).
type RegisterResponse struct {
	Worker                   Worker  `json:"worker"`
	HeartbeatIntervalSeconds float64 `json:"heartbeat_interval_seconds"`
	LeaseSeconds             float64 `json:"lease_seconds"`
}

// HeartbeatResponse answers POST /v1/workers/{id}/heartbeat.
type HeartbeatResponse struct {
	Worker         Worker `json:"worker"`
	LeasesExtended int    `json:"leases_extended"`
	// HandedBack counts running jobs the store said this worker held but
	// the heartbeat did not name (claims whose reply was lost): they were
	// handed back without using an attempt.
	HandedBack int `json:"handed_back"`
}

// HeartbeatRequest is the body of POST /v1/workers/{id}/heartbeat.
type HeartbeatRequest struct {
	// Leases are the lease tokens of every job the worker holds (running,
	// or finished with the outcome not yet delivered); required, [] when
	// it holds none. Only these leases are renewed: a job the worker does
	// not name is not kept alive by its heartbeats.
	Leases *[]string `json:"leases"`
}

// ClaimReplyGrace is how old a claim must be before a heartbeat that does
// not name it hands it back as lost: a claim answered just before (or
// while) the heartbeat was sent may not be known to the worker yet.
const ClaimReplyGrace = 5 * time.Second

// ClaimRequest is the body of POST /v1/workers/{id}/claim; every field is
// optional.
type ClaimRequest struct {
	Queues      []string `json:"queues,omitempty"`       // default the registered queues; a subset of them
	Limit       *int     `json:"limit,omitempty"`        // 1..1000, default 1
	WaitSeconds *float64 `json:"wait_seconds,omitempty"` // 0..60, default 0
}

// ClaimResponse answers a claim: the claimed jobs, each with its
// lease_token (possibly none).
type ClaimResponse struct {
	Jobs []*Job `json:"jobs"`
}

// workerCache keeps the registry records this server wrote or read, so
// heartbeats and claims need not list every worker.
type workerCache struct {
	mu    sync.Mutex
	m     map[string]core.WorkerInfo
	sweep int // size at which put next drops records of dead workers
}

// minCacheSweep is the cache size below which put never sweeps.
const minCacheSweep = 1024

func newWorkerCache() *workerCache {
	return &workerCache{m: map[string]core.WorkerInfo{}, sweep: minCacheSweep}
}

func (c *workerCache) get(id string) (core.WorkerInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.m[id]
	return w, ok
}

// put stores w. Workers that die without deregistering would otherwise
// stay cached for the life of the server, so when the cache has doubled
// since the last sweep, put drops the records whose heartbeat is older
// than deadAfter (amortised constant time per put).
func (c *workerCache) put(w core.WorkerInfo, deadAfter time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[w.ID] = w
	if len(c.m) < c.sweep {
		return
	}
	for id, x := range c.m {
		if w.HeartbeatAt.Sub(x.HeartbeatAt) >= deadAfter {
			delete(c.m, id)
		}
	}
	c.sweep = max(minCacheSweep, 2*len(c.m))
}

func (c *workerCache) del(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// workerID parses and checks the {id} path value: 1..255 bytes of UTF-8.
func workerID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if id == "" || len(id) > 255 || !utf8.ValidString(id) {
		return "", newProblem(SlugInvalidRequest, "worker id must be 1..255 bytes of UTF-8")
	}
	return id, nil
}

// lookupWorker returns id's live registry record. A record this server
// wrote less than WorkerStaleAfter ago comes from the cache (maintenance
// cannot have removed it yet); otherwise the store is asked for that one
// record (Store.Worker, never the whole registry), so servers sharing a
// store behind one load balancer see each other's registrations. A record
// past WorkerDeadAfter counts as missing: its worker was declared dead and
// must register again.
func (s *Server) lookupWorker(ctx context.Context, id string, now time.Time) (core.WorkerInfo, bool, error) {
	if w, ok := s.workers.get(id); ok && now.Sub(w.HeartbeatAt) < s.ccfg.WorkerStaleAfter {
		return w, true, nil
	}
	w, err := s.rw.Worker(ctx, id)
	switch {
	case errors.Is(err, core.ErrNotFound):
	case err != nil:
		return core.WorkerInfo{}, false, err
	case w.Liveness(now, s.ccfg.WorkerStaleAfter, s.ccfg.WorkerDeadAfter) != core.LivenessDead:
		s.workers.put(w, s.ccfg.WorkerDeadAfter)
		return w, true, nil
	}
	s.workers.del(id)
	return core.WorkerInfo{}, false, nil
}

func notRegistered(id string) error {
	return newProblem(SlugWorkerNotRegistered, fmt.Sprintf("worker %q is not registered (or was declared dead); register it with PUT /v1/workers/{id}", id))
}

// claimHeartbeatEvery is the least time between two heartbeats a
// worker's claims record (liveness is judged in tens of seconds).
const claimHeartbeatEvery = time.Second

// touch records a heartbeat of w at now.
func (s *Server) touch(ctx context.Context, w core.WorkerInfo, now time.Time) (core.WorkerInfo, error) {
	w.HeartbeatAt = now
	if err := s.rw.Register(ctx, w); err != nil {
		return w, err
	}
	s.workers.put(w, s.ccfg.WorkerDeadAfter)
	return w, nil
}

func validTags(tags []string) error {
	if len(tags) > contract.MaxTags {
		return newProblem(SlugInvalidRequest, fmt.Sprintf("%d tags, over the limit of %d", len(tags), contract.MaxTags))
	}
	for _, t := range tags {
		if t == "" || len(t) > contract.MaxTagLen || !utf8.ValidString(t) {
			return newProblem(SlugInvalidRequest, fmt.Sprintf("tag %q must be 1..%d bytes of UTF-8", t, contract.MaxTagLen))
		}
	}
	return nil
}

func validMetadata(md map[string]string) error {
	n := 0
	for k, v := range md {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return newProblem(SlugInvalidRequest, "metadata must be UTF-8")
		}
		n += len(k) + len(v)
	}
	if n > contract.MaxMetadataBytes {
		return newProblem(SlugInvalidRequest, fmt.Sprintf("metadata is %d bytes, over the limit of %d", n, contract.MaxMetadataBytes))
	}
	return nil
}

func (s *Server) registerWorker(w http.ResponseWriter, r *http.Request) error {
	id, err := workerID(r)
	if err != nil {
		return err
	}
	var req RegisterRequest
	if err := s.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	switch {
	case len(req.Queues) == 0:
		return newProblem(SlugInvalidRequest, "queues must name at least one queue")
	case len(req.Name) > 255 || !utf8.ValidString(req.Name):
		return newProblem(SlugInvalidRequest, "name must be at most 255 bytes of UTF-8")
	}
	if err := validQueues("queues", req.Queues); err != nil {
		return err
	}
	if err := validTags(req.Tags); err != nil {
		return err
	}
	if err := validMetadata(req.Metadata); err != nil {
		return err
	}
	if _, ok := req.Metadata[WorkerCredentialKey]; ok {
		return newProblem(SlugInvalidRequest, errReservedMetadata.Error())
	}
	if _, ok := req.Metadata[WorkerKindsKey]; ok {
		return newProblem(SlugInvalidRequest, "metadata key "+WorkerKindsKey+" is reserved: the server sets it to the worker's kinds (send them as kinds)")
	}
	kinds, err := validKinds(req.Kinds)
	if err != nil {
		return err
	}
	now := s.now()
	prev, existed, err := s.lookupWorker(r.Context(), id, now)
	if err != nil {
		return err
	}
	// The id is bound to the credential that registers it; while its
	// record lives, only that credential (or the admin token) may
	// register it again. The admin token binds nothing: it keeps the
	// binding the record has.
	owner := reqFrom(r.Context()).cred
	if owner == CredentialAdmin {
		owner = ""
	}
	if existed {
		if !s.mayActFor(r.Context(), ownerOf(prev)) {
			return forbiddenWorker(id)
		}
		if owner == "" {
			owner = ownerOf(prev)
		}
	}
	info := withOwner(core.WorkerInfo{
		ID: id, Host: req.Name, Queues: slices.Compact(slices.Clone(req.Queues)), Tags: req.Tags, Metadata: req.Metadata,
		StartedAt: now, HeartbeatAt: now,
	}, owner)
	if existed {
		info.StartedAt = prev.StartedAt
	}
	info = core.WithWorkerKinds(info, kinds)
	if err := validMetadata(info.Metadata); err != nil {
		return err
	}
	if err := s.rw.Register(r.Context(), info); err != nil {
		return err
	}
	s.workers.put(info, s.ccfg.WorkerDeadAfter)
	if !existed {
		s.c.Emit(core.Event{Kind: core.EventWorkerRegistered, At: now, Reason: id})
		reqFrom(r.Context()).log.Info("backlog http: worker registered", "worker_id", id, "queues", info.Queues)
	}
	writeJSON(w, http.StatusOK, RegisterResponse{
		Worker:                   s.toWorker(info, now),
		HeartbeatIntervalSeconds: s.ccfg.HeartbeatInterval.Seconds(),
		LeaseSeconds:             s.ccfg.LeaseDuration.Seconds(),
	})
	return nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	id, err := workerID(r)
	if err != nil {
		return err
	}
	var req HeartbeatRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if req.Leases == nil {
		return newProblem(SlugInvalidRequest, `a heartbeat names the leases it renews: send {"leases": [the lease tokens of every job this worker holds]} ([] when it holds none); workers that send none must be upgraded`)
	}
	toks := make([]leaseToken, 0, len(*req.Leases))
	for _, t := range *req.Leases {
		tok, err := decodeLeaseToken(t)
		if err != nil {
			return err
		}
		// Whatever the credential, a token of another worker is 400
		// (as in a batch of outcomes), before anything changes.
		if tok.workerID != id {
			return newProblem(SlugInvalidLeaseToken, fmt.Sprintf("lease token for job %d belongs to another worker", tok.jobID))
		}
		toks = append(toks, tok)
	}
	ctx := r.Context()
	now := s.now()
	info, ok, err := s.lookupWorker(ctx, id, now)
	if err != nil {
		return err
	}
	if !ok {
		return notRegistered(id)
	}
	if info, _, err = s.actFor(ctx, info); err != nil {
		return err
	}
	// Leases under tokens this server did not sign (or of a worker bound
	// to another credential) are not renewed, as if their executions had
	// ended: the store's jobs they name are not named, and are handed
	// back below.
	leases := make([]contract.Lease, 0, len(toks))
	named := make(map[contract.Lease]bool, len(toks))
	for _, tok := range toks {
		if err := s.checkToken(ctx, tok); err != nil {
			var p *problem
			if errors.As(err, &p) {
				continue
			}
			return err
		}
		l := contract.Lease{JobID: tok.jobID, ClaimSeq: tok.claimSeq}
		leases = append(leases, l)
		named[l] = true
	}
	if info, err = s.touch(ctx, info, now); err != nil {
		return err
	}
	n := 0
	if len(leases) > 0 {
		if n, err = s.rw.Extend(r.Context(), id, leases, now.Add(s.ccfg.LeaseDuration)); err != nil {
			return err
		}
	}
	back, err := s.handBackUnknown(r.Context(), id, named, now)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, HeartbeatResponse{Worker: s.toWorker(info, now), LeasesExtended: n, HandedBack: back})
	return nil
}

// handBackUnknown hands back the running jobs the store says worker id
// holds but its heartbeat did not name (named holds the leases it named;
// an earlier claim's token of the same job names another claim), claimed
// more than ClaimReplyGrace ago: claims whose reply the worker never
// received. Each goes back without using an attempt and keeps its place
// in the queue (core.HandBack, cause claim_lost).
func (s *Server) handBackUnknown(ctx context.Context, id string, named map[contract.Lease]bool, now time.Time) (int, error) {
	jobs, err := s.c.ListJobs(ctx, core.ListParams{WorkerID: id, States: []core.State{core.StateRunning}, Limit: 1000})
	if err != nil {
		return 0, err
	}
	var lost []*core.Job
	for _, j := range jobs {
		if named[contract.Lease{JobID: j.ID, ClaimSeq: j.ClaimSeq}] {
			continue
		}
		if !j.AttemptedAt.Before(now.Add(-ClaimReplyGrace)) {
			continue
		}
		lost = append(lost, j)
	}
	if len(lost) == 0 {
		return 0, nil
	}
	applied, err := s.rw.HandBack(ctx, lost, core.CauseClaimLost, 0, now)
	if err != nil {
		return 0, err
	}
	back := 0
	for i, ok := range applied {
		if !ok {
			continue
		}
		back++
		j := lost[i]
		s.claims.take(j.ID, j.ClaimSeq)
		s.log.Warn("backlog http: handed back a job the worker does not hold (its claim's reply was lost)", "holder", id, "job_id", j.ID, "kind", j.Kind)
	}
	if back > 0 {
		s.wake.broadcast()
	}
	return back, nil
}

func (s *Server) deregisterWorker(w http.ResponseWriter, r *http.Request) error {
	id, err := workerID(r)
	if err != nil {
		return err
	}
	// Only the credential the id is bound to may remove its record (a
	// missing or dead record is no one's).
	if info, ok, err := s.lookupWorker(r.Context(), id, s.now()); err != nil {
		return err
	} else if ok && !s.mayActFor(r.Context(), ownerOf(info)) {
		return forbiddenWorker(id)
	}
	if err := s.rw.Deregister(r.Context(), id); err != nil {
		return err
	}
	s.workers.del(id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.c.ListWorkers(r.Context())
	if err != nil {
		return err
	}
	now := s.now()
	out := struct {
		Workers []Worker `json:"workers"`
	}{Workers: make([]Worker, 0, len(ws))}
	for _, x := range ws {
		out.Workers = append(out.Workers, s.toWorker(x, now))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) claim(w http.ResponseWriter, r *http.Request) error {
	id, err := workerID(r)
	if err != nil {
		return err
	}
	var req ClaimRequest
	if err := s.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	limit := 1
	if req.Limit != nil {
		if *req.Limit < 1 || *req.Limit > MaxClaimLimit {
			return newProblem(SlugInvalidRequest, fmt.Sprintf("limit must be from 1 to %d, not %d", MaxClaimLimit, *req.Limit))
		}
		limit = *req.Limit
	}
	var wait time.Duration
	if req.WaitSeconds != nil {
		if *req.WaitSeconds < 0 || *req.WaitSeconds > DefaultMaxClaimWait.Seconds() {
			return newProblem(SlugInvalidRequest, fmt.Sprintf("wait_seconds must be from 0 to %g", DefaultMaxClaimWait.Seconds()))
		}
		wait = min(time.Duration(*req.WaitSeconds*float64(time.Second)), s.cfg.MaxClaimWait)
	}
	if err := validQueues("queues", req.Queues); err != nil {
		return err
	}
	ctx := r.Context()
	now := s.now()
	info, ok, err := s.lookupWorker(ctx, id, now)
	if err != nil {
		return err
	}
	if !ok {
		return notRegistered(id)
	}
	info, rebind, err := s.actFor(ctx, info)
	if err != nil {
		return err
	}
	// Tokens are signed before anything is claimed: a claim must never
	// take jobs it cannot answer with tokens.
	keys, err := s.lease.resolve(ctx)
	if err != nil {
		return err
	}
	queues, err := claimQueues(info.Queues, req.Queues)
	if err != nil {
		return err
	}
	// A claim is also a heartbeat, written at most once a second per
	// worker: busy workers claim far more often than liveness needs.
	if rebind || now.Sub(info.HeartbeatAt) >= claimHeartbeatEvery {
		if info, err = s.touch(ctx, info, now); err != nil {
			return err
		}
	}

	// Claims run detached from the request: a claim the client abandons
	// half-way still completes, and its jobs are handed back below.
	bg := context.WithoutCancel(ctx)
	var (
		claimed []*core.Job
		timer   <-chan time.Time
		ticker  *time.Ticker
	)
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
		ticker = time.NewTicker(s.cfg.ClaimPollInterval)
		defer ticker.Stop()
	}
	slot := heavySlot{slots: s.heavy} // held while the claim holds jobs
	defer slot.release()
	for {
		woken := s.wake.wait()
		jobs, err := s.claimBudgeted(bg, &slot, info, queues, limit-len(claimed))
		claimed = append(claimed, jobs...)
		if err != nil {
			if len(claimed) == 0 {
				return err
			}
			reqFrom(ctx).log.Warn("backlog http: claim failed part-way; returning the jobs claimed so far", "worker_id", id, "jobs", len(claimed), "err", err)
			break
		}
		if len(claimed) > 0 || wait == 0 || !s.sleep(ctx, timer, woken, ticker.C) {
			break
		}
	}
	if ctx.Err() != nil {
		if len(claimed) > 0 {
			s.handBack(bg, reqFrom(ctx).log, id, claimed)
		}
		return nil // the client is gone: nobody reads an answer
	}
	owner := ownerOf(info)
	return s.writeClaim(w, r, id, claimed, func(j *core.Job) string { return signToken(keys, j, id, owner) })
}

// sleep waits for a wake-up or a poll tick (true) or for the end of the
// wait, of the request or of the server (false).
func (s *Server) sleep(ctx context.Context, end <-chan time.Time, woken <-chan struct{}, tick <-chan time.Time) bool {
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	select {
	case <-ctx.Done():
		return false
	case <-s.ctx.Done():
		return false
	case <-end:
		return false
	case <-woken:
	case <-tick:
	}
	return true
}

// handBack returns jobs claimed for a client that went away: each is
// snoozed to now without using an attempt, so it is not stranded until
// its lease expires.
func (s *Server) handBack(ctx context.Context, log *slog.Logger, workerID string, jobs []*core.Job) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := s.rw.HandBack(ctx, jobs, "", 0, s.now()); err != nil {
		log.Warn("backlog http: handing back jobs of an abandoned claim failed; they return after lease expiry", "worker_id", workerID, "jobs", len(jobs), "err", err)
		return
	}
	log.Info("backlog http: claim abandoned by its client; jobs handed back", "worker_id", workerID, "jobs", len(jobs))
	s.wake.broadcast()
}
