//go:build linux

package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// producer enqueues jobs while the workers run and the faults happen, in
// chunks of one `backlog enqueue --from` run each. Every job has a unique
// key held for an hour after it finishes, so a chunk sent again after an
// error (its first try may have committed without its reply arriving)
// inserts nothing twice. A chunk whose enqueue returned success is
// acknowledged; the scenario then requires each of its jobs in the store.
type producer struct {
	c     *cluster
	flags []string // global flags of the enqueue runs: --db URL, or --server URL
	label string
	total int           // jobs to produce
	chunk int           // jobs per enqueue run
	every time.Duration // pause between chunks
	until time.Time     // give up retrying a chunk after this

	mu     sync.Mutex
	acked  map[string]bool // unique keys of acknowledged jobs
	errs   int             // failed enqueue runs (each retried)
	last   string          // the last error
	firstE time.Time       // first and last failed enqueue run
	lastE  time.Time
	done   chan struct{}
}

// newProducer prepares a producer of total jobs over about spread: chunks
// of 25 jobs, evenly spaced.
func newProducer(c *cluster, flags []string, total int, spread, retryFor time.Duration) *producer {
	chunk := 25
	n := max((total+chunk-1)/chunk, 1)
	return &producer{c: c, flags: flags, label: c.marker, total: total, chunk: chunk, every: spread / time.Duration(n),
		until: time.Now().Add(spread + retryFor), acked: map[string]bool{}, done: make(chan struct{})}
}

// key is the unique key of the producer's job seq.
func (p *producer) key(seq int) string { return fmt.Sprintf("p-%s-%d", p.label, seq) }

// run produces until every chunk was acknowledged, ctx ends or the retry
// time is over; it closes p.done.
func (p *producer) run(ctx context.Context) {
	defer close(p.done)
	rng := mrand.New(mrand.NewPCG(uint64(p.total), 11))
	path := filepath.Join(p.c.dir, "produced.jsonl")
	for first := 0; first < p.total; first += p.chunk {
		var lines []string
		for seq := first; seq < min(first+p.chunk, p.total); seq++ {
			lines = append(lines, fmt.Sprintf(`{"kind":"fault","args":{"ms":%d,"p":%d},"priority":5,"unique_key":%q,"unique_for":"1h"}`,
				20+rng.IntN(100), seq, p.key(seq)))
		}
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			p.fail(err)
			return
		}
		for {
			if err := p.send(ctx, path); err == nil {
				p.mu.Lock()
				for seq := first; seq < min(first+p.chunk, p.total); seq++ {
					p.acked[p.key(seq)] = true
				}
				p.mu.Unlock()
				break
			} else {
				p.fail(err)
			}
			if ctx.Err() != nil || time.Now().After(p.until) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.every):
		}
	}
}

// send runs one enqueue of the chunk in path.
func (p *producer) send(ctx context.Context, path string) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args := append(append([]string{}, p.flags...), "--log-level", "error", "-o", "json", "enqueue", "--from", path, "--queue", "fault")
	out, err := p.c.run(cctx, args...)
	if err != nil {
		return err
	}
	var res struct {
		Inserted   int `json:"inserted"`
		Duplicates int `json:"duplicates"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return fmt.Errorf("enqueue -o json: %v: %s", err, out)
	}
	return nil
}

func (p *producer) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs++
	p.last = err.Error()
	if p.firstE.IsZero() {
		p.firstE = time.Now()
	}
	p.lastE = time.Now()
}

// acknowledged returns the number of acknowledged jobs.
func (p *producer) acknowledged() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// lost returns the acknowledged jobs missing from jobs.
func (p *producer) lost(jobs []jobInfo) []string {
	have := map[string]bool{}
	for _, j := range jobs {
		if j.UniqueKey != "" {
			have[j.UniqueKey] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for k := range p.acked {
		if !have[k] {
			out = append(out, k)
		}
	}
	return out
}

// summary describes what the producer did.
func (p *producer) summary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := fmt.Sprintf("producer: %d of %d jobs acknowledged, %d failed enqueue runs (retried)", len(p.acked), p.total, p.errs)
	if p.errs > 0 {
		s += fmt.Sprintf(" over %s, last: %s", p.lastE.Sub(p.firstE).Round(time.Millisecond), firstLine(p.last))
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
