package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

var workerTests = []test{
	{"workers/register-round-trips-every-field", testWorkerRoundTrip},
	{"workers/register-again-is-a-heartbeat", testWorkerHeartbeat},
	{"workers/list-is-ordered-by-id", testWorkerOrder},
	{"workers/deregister-removes-one-record", testWorkerDeregister},
	{"workers/remove-dead-workers-by-heartbeat", testWorkerRemoveDead},
	{"workers/get-one-record-by-id", testWorkerGetOne},
}

func (e *env) worker(id string) contract.WorkerInfo {
	return contract.WorkerInfo{ID: id, Host: "host-1", PID: 4242, Queues: []string{"default"}, StartedAt: e.now, HeartbeatAt: e.now}
}

func (e *env) register(w contract.WorkerInfo) {
	e.Helper()
	if err := e.s.RegisterWorker(e.ctx, w); err != nil {
		e.Fatalf("RegisterWorker(%q): unexpected error: %v", w.ID, err)
	}
}

func (e *env) workers() []contract.WorkerInfo {
	e.Helper()
	ws, err := e.s.Workers(e.ctx)
	if err != nil {
		e.Fatalf("Workers: unexpected error: %v", err)
	}
	return ws
}

func diffWorker(got, want contract.WorkerInfo) []string {
	var d []string
	if got.ID != want.ID || got.Host != want.Host || got.PID != want.PID {
		d = append(d, fmt.Sprintf("ID/Host/PID: got %q/%q/%d, want %q/%q/%d", got.ID, got.Host, got.PID, want.ID, want.Host, want.PID))
	}
	if !(len(got.Queues) == 0 && len(want.Queues) == 0) && !slices.Equal(got.Queues, want.Queues) {
		d = append(d, fmt.Sprintf("Queues: got %q, want %q", got.Queues, want.Queues))
	}
	if !(len(got.Tags) == 0 && len(want.Tags) == 0) && !slices.Equal(got.Tags, want.Tags) {
		d = append(d, fmt.Sprintf("Tags: got %q, want %q", got.Tags, want.Tags))
	}
	if !(len(got.Metadata) == 0 && len(want.Metadata) == 0) && !maps.Equal(got.Metadata, want.Metadata) {
		d = append(d, fmt.Sprintf("Metadata: got %q, want %q", got.Metadata, want.Metadata))
	}
	d = append(d, diffTime("StartedAt", got.StartedAt, want.StartedAt)...)
	d = append(d, diffTime("HeartbeatAt", got.HeartbeatAt, want.HeartbeatAt)...)
	return d
}

func testWorkerRoundTrip(e *env) {
	w := contract.WorkerInfo{
		ID:          "host-ü-1234-abcd",
		Host:        "node-🚀.example",
		PID:         1234,
		Queues:      []string{"default", "mail", "Q_1-a.b:c"},
		Tags:        []string{"region=eu", "标签"},
		Metadata:    map[string]string{"version": "1.2.3", "ключ": "значение"},
		StartedAt:   e.now.Add(-time.Hour).In(zone),
		HeartbeatAt: e.now.In(zone),
	}
	e.register(w)
	ws := e.workers()
	if len(ws) != 1 {
		e.Fatalf("Workers after one RegisterWorker returned %d records; want 1", len(ws))
	}
	want := w
	want.StartedAt, want.HeartbeatAt = w.StartedAt.UTC(), w.HeartbeatAt.UTC()
	if d := diffWorker(ws[0], want); len(d) > 0 {
		e.Fatalf("the worker record did not round-trip (times handed in at UTC+05:30 come back as the same instant in UTC):\n%s", lines(d))
	}
}

func testWorkerHeartbeat(e *env) {
	w := e.worker("w1")
	e.register(w)
	e.advance(10 * time.Second)
	w.HeartbeatAt = e.now
	w.Queues = []string{"default", "mail"}
	e.register(w)
	ws := e.workers()
	if len(ws) != 1 {
		e.Fatalf("Workers after registering one id twice returned %d records; RegisterWorker must be idempotent on ID", len(ws))
	}
	if d := diffWorker(ws[0], w); len(d) > 0 {
		e.Fatalf("registering again must update HeartbeatAt and the other fields:\n%s", lines(d))
	}
}

func testWorkerOrder(e *env) {
	for _, id := range []string{"w-c", "w-a", "w-b"} {
		e.register(e.worker(id))
	}
	var got []string
	for _, w := range e.workers() {
		got = append(got, w.ID)
	}
	if !slices.Equal(got, []string{"w-a", "w-b", "w-c"}) {
		e.Fatalf("Workers returned ids %q; want [\"w-a\" \"w-b\" \"w-c\"] (ordered by id)", got)
	}
}

func testWorkerDeregister(e *env) {
	e.register(e.worker("w-a"))
	e.register(e.worker("w-b"))
	if err := e.s.DeregisterWorker(e.ctx, "w-a"); err != nil {
		e.Fatalf("DeregisterWorker: unexpected error: %v", err)
	}
	if err := e.s.DeregisterWorker(e.ctx, "never-registered"); err != nil {
		e.Fatalf("DeregisterWorker of an unknown id returned %v; missing is not an error", err)
	}
	if ws := e.workers(); len(ws) != 1 || ws[0].ID != "w-b" {
		e.Fatalf("Workers after deregistering \"w-a\" returned %v; want only \"w-b\"", ws)
	}
}

func testWorkerRemoveDead(e *env) {
	e.register(e.worker("dead-1"))
	e.register(e.worker("dead-2"))
	e.advance(time.Minute)
	cutoff := e.now
	edge := e.worker("at-cutoff")
	e.register(edge)
	e.advance(time.Minute)
	e.register(e.worker("alive"))
	n, err := e.s.RemoveDeadWorkers(e.ctx, cutoff)
	if err != nil {
		e.Fatalf("RemoveDeadWorkers: unexpected error: %v", err)
	}
	var left []string
	for _, w := range e.workers() {
		left = append(left, w.ID)
	}
	if n != 2 || !slices.Equal(left, []string{"alive", "at-cutoff"}) {
		e.Fatalf("RemoveDeadWorkers(before %s) returned %d and left %q; want 2 removed, [\"alive\" \"at-cutoff\"] left (a heartbeat exactly at the cutoff is not before it)", ts(cutoff), n, left)
	}
}

func testWorkerGetOne(e *env) {
	zone := time.FixedZone("IST", 5*3600+1800)
	w := contract.WorkerInfo{
		ID: "w-ü-2", Host: "node-2", PID: 77, Queues: []string{"mail", "default"}, Tags: []string{"gpu"},
		Metadata: map[string]string{"k": "v"}, StartedAt: e.now.Add(-time.Minute).In(zone), HeartbeatAt: e.now.In(zone),
	}
	for _, id := range []string{"w-a", "W-ü-2", "w-ü-20"} {
		e.register(e.worker(id))
	}
	e.register(w)
	got, err := e.s.Worker(e.ctx, w.ID)
	if err != nil {
		e.Fatalf("Worker(%q) of a registered worker: unexpected error: %v", w.ID, err)
	}
	want := w
	want.StartedAt, want.HeartbeatAt = w.StartedAt.UTC(), w.HeartbeatAt.UTC()
	if d := diffWorker(got, want); len(d) > 0 {
		e.Fatalf("Worker(%q) must return that one record as RegisterWorker stored it (ids compare byte for byte; times in UTC):\n%s", w.ID, lines(d))
	}
	for _, missing := range []string{"never-registered", "w-ü", "W-Ü-2"} {
		if _, err := e.s.Worker(e.ctx, missing); !errors.Is(err, contract.ErrNotFound) {
			e.Fatalf("Worker(%q) of an id with no record returned %v; want an error wrapping core.ErrNotFound", missing, err)
		}
	}
	if err := e.s.DeregisterWorker(e.ctx, w.ID); err != nil {
		e.Fatalf("DeregisterWorker: unexpected error: %v", err)
	}
	if _, err := e.s.Worker(e.ctx, w.ID); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("Worker(%q) after DeregisterWorker returned %v; want core.ErrNotFound", w.ID, err)
	}
}
