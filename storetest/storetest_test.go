package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/store/memory"
	"github.com/backlogq/backlog/storetest"
)

// Broken stores: the memory store with one rule of the contract violated.
// The suite must fail each of them at the named subtest.

// silentNotifier declares core.Notifier but never delivers.
type silentNotifier struct{ *memory.Store }

func (silentNotifier) Listen(ctx context.Context) (<-chan core.Notification, error) {
	ch := make(chan core.Notification)
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

// declaresTxInsert declares core.TxInserter; run without Factory.BeginTx.
type declaresTxInsert struct{ *memory.Store }

func (declaresTxInsert) InsertTx(context.Context, any, time.Time, []core.InsertParams) ([]core.InsertResult, error) {
	return nil, core.ErrUnsupported
}

// clockSkewed claims as if it were an hour later.
type clockSkewed struct{ *memory.Store }

func (s clockSkewed) Claim(ctx context.Context, p core.ClaimParams) ([]*core.Job, error) {
	p.Now = p.Now.Add(time.Hour)
	return s.Store.Claim(ctx, p)
}

// localTimes returns times in a non-UTC zone.
type localTimes struct{ *memory.Store }

func (s localTimes) Get(ctx context.Context, id int64) (*core.Job, error) {
	j, err := s.Store.Get(ctx, id)
	if j != nil {
		j.CreatedAt = j.CreatedAt.In(time.FixedZone("CET", 3600))
	}
	return j, err
}

// racySettings gets or creates a setting by "select, then insert", with
// a pause in between, as the contract forbids.
type racySettings struct {
	*memory.Store
	mu sync.Mutex
	m  map[string][]byte
}

func (s *racySettings) GetOrCreateSetting(ctx context.Context, key string, value []byte) ([]byte, bool, error) {
	s.mu.Lock()
	v, ok := s.m[key]
	s.mu.Unlock()
	if ok {
		return v, false, nil
	}
	time.Sleep(time.Millisecond)
	s.mu.Lock()
	s.m[key] = value
	s.mu.Unlock()
	return value, true, nil
}

func (s *racySettings) Setting(ctx context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[key]; ok {
		return v, nil
	}
	return nil, core.ErrNotFound
}

// workerScan finds one worker by id in the wrong place: ids compared
// case-insensitively.
type workerScan struct{ *memory.Store }

func (s workerScan) Worker(ctx context.Context, id string) (core.WorkerInfo, error) {
	ws, err := s.Workers(ctx)
	if err != nil {
		return core.WorkerInfo{}, err
	}
	for _, w := range ws {
		if strings.EqualFold(w.ID, id) {
			return w, nil
		}
	}
	return core.WorkerInfo{}, core.ErrNotFound
}

// dropsFingerprints keeps no UniqueFingerprint with its holds.
type dropsFingerprints struct{ *memory.Store }

func (s dropsFingerprints) Insert(ctx context.Context, now time.Time, jobs []core.InsertParams) ([]core.InsertResult, error) {
	cp := make([]core.InsertParams, len(jobs))
	for i, p := range jobs {
		p.UniqueFingerprint = ""
		cp[i] = p
	}
	return s.Store.Insert(ctx, now, cp)
}

var broken = []struct {
	name    string
	wrap    func(*memory.Store) core.Store
	subtest string // the rule that must fail
	message string // a phrase the failure must contain
	slow    bool   // waits out the suite's notification timeout
}{
	{"silent-notifier", func(s *memory.Store) core.Store { return silentNotifier{s} }, "notify/insert-of-due-job-wakes-listener", "must deliver it", true},
	{"tx-without-begintx", func(s *memory.Store) core.Store { return declaresTxInsert{s} }, "tx/insert-is-visible-after-commit", "Factory.BeginTx is nil", false},
	{"clock-skewed", func(s *memory.Store) core.Store { return clockSkewed{s} }, "claim/never-returns-future-jobs", "never return a job that is not due", false},
	{"local-times", func(s *memory.Store) core.Store { return localTimes{s} }, "insert/state-follows-run-at", "UTC", false},
	{"racy-settings", func(s *memory.Store) core.Store { return &racySettings{Store: s, m: map[string][]byte{}} }, "settings/get-or-create-is-atomic", "exactly 1", false},
	{"worker-case-insensitive", func(s *memory.Store) core.Store { return workerScan{s} }, "workers/get-one-record-by-id", "byte for byte", false},
	{"drops-fingerprints", func(s *memory.Store) core.Store { return dropsFingerprints{s} }, "unique-holds/fingerprint-kept-with-the-hold", "fingerprint", false},
}

// TestBrokenStore runs the suite against the broken store named by
// STORETEST_BROKEN; TestSuiteCatchesBrokenStores runs it in a subprocess.
func TestBrokenStore(t *testing.T) {
	name := os.Getenv("STORETEST_BROKEN")
	if name == "" {
		t.Skip("run by TestSuiteCatchesBrokenStores")
	}
	for _, b := range broken {
		if b.name == name {
			storetest.Run(t, storetest.Factory{New: func(t testing.TB, _ core.ClaimStrategy) core.Store {
				s := memory.New()
				t.Cleanup(func() { s.Close() })
				return b.wrap(s)
			}})
			return
		}
	}
	t.Fatalf("unknown broken store %q", name)
}

// TestSuiteCatchesBrokenStores checks that the suite fails stores that
// break the contract, at the subtest named after the broken rule, with a
// message that says what is wrong.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	if os.Getenv("STORETEST_BROKEN") != "" {
		t.Skip("inside a subprocess")
	}
	for _, b := range broken {
		t.Run(b.name, func(t *testing.T) {
			if b.slow && testing.Short() {
				t.Skip("waits for the notification timeout")
			}
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenStore$/^strategy=default$/^"+b.subtest+"$", "-test.v")
			cmd.Env = append(os.Environ(), "STORETEST_BROKEN="+b.name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store that breaks %s:\n%s", b.subtest, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestBrokenStore/strategy=default/"+b.subtest) {
				t.Fatalf("the suite did not fail subtest %s:\n%s", b.subtest, out)
			}
			if !strings.Contains(string(out), b.message) {
				t.Fatalf("the failure message does not contain %q:\n%s", b.message, out)
			}
		})
	}
}
