package core

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// WorkerKindsKey is the metadata key of a worker's registry record that
// holds the kinds it handles, as a JSON array of strings, sorted: every
// Client that runs handlers writes its own there when it registers, and a
// remote worker announces its own when it registers through the HTTP API.
// Enqueue reads them to tell a known kind from a typo (CheckKinds).
const WorkerKindsKey = "backlog.kinds"

// announcedKindsRefresh is how long CheckKinds reuses its read of the
// worker registry: a worker that registered elsewhere is seen within it.
const announcedKindsRefresh = time.Second

// WorkerKinds returns the kinds w announced under WorkerKindsKey, nil when
// none (or when the record holds no valid list).
func WorkerKinds(w WorkerInfo) []string {
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

// WithWorkerKinds returns a copy of w announcing kinds under
// WorkerKindsKey (sorted, without repeats); no kinds removes the entry.
func WithWorkerKinds(w WorkerInfo, kinds []string) WorkerInfo {
	md := maps.Clone(w.Metadata)
	delete(md, WorkerKindsKey)
	if len(kinds) > 0 {
		if md == nil {
			md = map[string]string{}
		}
		ks := slices.Compact(slices.Sorted(slices.Values(kinds)))
		b, _ := json.Marshal(ks)
		md[WorkerKindsKey] = string(b)
	}
	w.Metadata = md
	return w
}

// announcedKinds caches the worker registry CheckKinds reads.
type announcedKinds struct {
	mu      sync.Mutex
	read    time.Time // when workers was read; zero: read again
	workers []WorkerInfo
}

// ForgetWorkerKinds makes the next CheckKinds read the worker registry
// again (a worker registered or deregistered through this process).
func (c *Client) ForgetWorkerKinds() {
	c.announced.mu.Lock()
	c.announced.read = time.Time{}
	c.announced.mu.Unlock()
}

// workerKinds returns the kinds announced by the registered workers not
// declared dead, reading the registry when the last read is older than
// announcedKindsRefresh.
func (c *Client) workerKinds(ctx context.Context) (map[string]bool, error) {
	a := &c.announced
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.read.IsZero() || time.Since(a.read) >= announcedKindsRefresh {
		ws, err := c.store.Workers(ctx)
		if err != nil {
			return nil, fmt.Errorf("backlog: read the worker registry to check kinds: %w", err)
		}
		a.workers, a.read = ws, time.Now()
	}
	now := c.clock.Now()
	known := map[string]bool{}
	for _, w := range a.workers {
		if w.Liveness(now, c.cfg.WorkerStaleAfter, c.cfg.WorkerDeadAfter) == LivenessDead {
			continue
		}
		for _, k := range WorkerKinds(w) {
			known[k] = true
		}
	}
	return known, nil
}

// CheckKinds applies the one rule on job kinds that Enqueue, EnqueueMany,
// EnqueueTx and the HTTP API's submissions share: a job's kind is known
// when this client has a handler for it or declares it (Handlers.Declare),
// or when a worker of the registry not declared dead announced it
// (WorkerKindsKey: every Client running handlers, and remote workers,
// announce theirs). A job of an unknown kind is refused with an error
// wrapping ErrUnknownKind naming it (and its index in jobs when there are
// several), unless Config.AllowUnknownKinds is set, or nothing can be
// checked: this client neither handles nor declares a kind and no live
// worker announced one (a producer before any worker started). Allow
// unknown kinds on a producer that enqueues a kind before the workers
// that handle it are deployed.
//
// Local kinds cost nothing; an unknown one reads the worker registry, at
// most once a second (a worker registering through this process is seen
// at once). An error reading the registry is returned as such.
func (c *Client) CheckKinds(ctx context.Context, jobs []InsertParams) error {
	if c.cfg.AllowUnknownKinds {
		return nil
	}
	h := c.cfg.Handlers
	var announced map[string]bool
	for i, j := range jobs {
		if h.Known(j.Kind) {
			continue
		}
		if announced == nil {
			var err error
			if announced, err = c.workerKinds(ctx); err != nil {
				return err
			}
		}
		if announced[j.Kind] || (h.count() == 0 && len(announced) == 0) {
			continue
		}
		err := fmt.Errorf("%w %q: neither this client nor any live registered worker handles it (Config.AllowUnknownKinds accepts kinds no worker announced yet)", ErrUnknownKind, j.Kind)
		if len(jobs) == 1 {
			return err
		}
		return fmt.Errorf("job %d: %w", i, err)
	}
	return nil
}
