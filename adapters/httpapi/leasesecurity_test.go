package httpapi

import (
	"bytes"
	"context"
	"database/sql/driver"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/syncbuf"
	"github.com/backlogq/backlog/internal/teststores"
	"github.com/backlogq/backlog/store/memory"
	"github.com/backlogq/backlog/store/sqlite"
)

// forgeries returns tokens for job j held by worker holder at claim 1 that
// this server did not sign: the unsigned v2 format of older servers, the
// v3 format with a made-up MAC, and the v3 format signed with another
// secret.
func forgeries(j *Job, holder string) map[string]string {
	w := base64.RawURLEncoding.EncodeToString([]byte(holder))
	t := leaseToken{jobID: j.ID, claimSeq: 1, attempt: j.Attempt, workerID: holder}
	made := t
	made.mac = string(bytes.Repeat([]byte{0x5a}, leaseMACBytes))
	other := t
	other.mac = string(leaseMAC([]byte("a secret of some other server!!!"), t))
	return map[string]string{
		"unsigned v2": fmt.Sprintf("v2.%d.1.%d.%s", j.ID, j.Attempt, w),
		"made-up MAC": made.format(),
		"other key":   other.format(),
	}
}

// TestForgedLeaseTokensAreRefused: a worker that reads another worker's
// job (GET /v1/jobs/{id} shows its id, attempt and holder) and builds a
// token for it cannot complete, fail, snooze, extend or batch an outcome
// of it: every such token gets the answer of a stale one (409
// lease-lost, nothing changed).
func TestForgedLeaseTokensAreRefused(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		h := newHarness(t, st, core.Config{}, Config{Tokens: Tokens{Worker: "work-token", Admin: "admin-token"}})
		h.token = "work-token"
		h.register("a", map[string]any{"queues": []string{"default"}})
		h.register("b", map[string]any{"queues": []string{"other"}})
		h.token = "admin-token"
		h.submit(map[string]any{"kind": "k"})
		h.token = "work-token"
		mine := h.claim("a", nil)[0]
		seen := h.get(mine.ID) // what worker b can read
		if seen.WorkerID != "a" || seen.State != core.StateRunning {
			t.Fatalf("job as read: %+v", seen)
		}
		before := h.state()
		for name, tok := range forgeries(seen, "a") {
			for _, c := range []struct {
				path string
				body map[string]any
			}{
				{outcomePath(seen, "complete"), map[string]any{"lease_token": tok, "result": "forged"}},
				{outcomePath(seen, "fail"), map[string]any{"lease_token": tok, "error": "forged", "action": "discard"}},
				{outcomePath(seen, "snooze"), map[string]any{"lease_token": tok, "delay_seconds": 3600}},
				{outcomePath(seen, "lease"), map[string]any{"lease_token": tok, "extend_seconds": 3600}},
			} {
				p := wantProblem(t, h.do("POST", c.path, c.body), SlugLeaseLost)
				if !strings.Contains(p.Detail, "nothing changed") {
					t.Errorf("%s on %s: detail %q does not say that nothing changed", name, c.path, p.Detail)
				}
			}
			var out OutcomesResponse
			h.must(http.StatusOK, "POST", "/v1/workers/a/outcomes", map[string]any{"outcomes": []map[string]any{
				{"job_id": seen.ID, "lease_token": tok, "type": "complete"},
			}}, &out)
			if r := out.Results[0]; r.Applied || r.Problem == nil || !strings.HasSuffix(r.Problem.Type, "/"+SlugLeaseLost) {
				t.Fatalf("%s in a batch: %+v", name, r)
			}
			if after := h.state(); after != before {
				t.Fatalf("a %s token changed the store:\n%s\nthen\n%s", name, before, after)
			}
		}
		// The real token still works.
		h.must(http.StatusOK, "POST", outcomePath(mine, "complete"), map[string]any{"lease_token": mine.LeaseToken}, nil)
	})
}

// TestForgedLeaseInHeartbeatIsNotRenewed: a heartbeat naming a token the
// server did not sign renews nothing for it; the job it names is treated
// as one the worker does not hold (handed back once the claim is older
// than ClaimReplyGrace).
func TestForgedLeaseInHeartbeatIsNotRenewed(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		clock := newFakeClock()
		h := newHarness(t, st, core.Config{Clock: clock}, Config{})
		h.register("w", map[string]any{"queues": []string{"default"}})
		j := h.claimOne("w", map[string]any{"kind": "k"})
		lease := h.coreJob(j.ID).LeaseUntil
		clock.Advance(ClaimReplyGrace + time.Second)
		forged := forgeries(j, "w")
		hb := h.heartbeat("w", forged["made-up MAC"], forged["unsigned v2"])
		if hb.LeasesExtended != 0 || hb.HandedBack != 1 {
			t.Fatalf("heartbeat with forged tokens: %+v; want nothing renewed and the job handed back", hb)
		}
		if got := h.coreJob(j.ID); got.State != core.StateAvailable || got.LeaseUntil.After(lease) {
			t.Fatalf("job after the heartbeat: %s, lease %s", got.State, got.LeaseUntil)
		}
	})
}

// TestUnsignedTokenOfOlderServerSaysWhatToDo: a v2 token held across an
// upgrade is lease-lost (the Go client then stops its handler) with a
// detail that names the cause and says to claim again.
func TestUnsignedTokenOfOlderServerSaysWhatToDo(t *testing.T) {
	h := newHarness(t, teststores.Memory(t), core.Config{}, Config{})
	h.register("w", map[string]any{"queues": []string{"default"}})
	j := h.claimOne("w", map[string]any{"kind": "k"})
	p := wantProblem(t, h.do("POST", outcomePath(j, "complete"), map[string]any{"lease_token": forgeries(j, "w")["unsigned v2"]}), SlugLeaseLost)
	if !strings.Contains(p.Detail, "unsigned token from an older server") || !strings.Contains(p.Detail, "claim again") {
		t.Fatalf("detail %q", p.Detail)
	}
}

// TestLeaseTokensAcrossServersAndRestarts: with the secret kept in the
// store, a token issued by one server is taken by another on the same
// store, and by a server started after the first one stopped.
func TestLeaseTokensAcrossServersAndRestarts(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		if _, ok := st.(contract.Settings); !ok {
			t.Fatalf("%T does not keep settings", st)
		}
		first := newHarness(t, st, core.Config{}, Config{})
		second := newHarness(t, st, core.Config{}, Config{})
		first.register("w", map[string]any{"queues": []string{"default"}})
		a := first.claimOne("w", map[string]any{"kind": "k"})
		b := first.claimOne("w", map[string]any{"kind": "k"})
		second.must(http.StatusOK, "POST", outcomePath(a, "complete"), map[string]any{"lease_token": a.LeaseToken}, nil)

		// A restart: a new client and server on the same store.
		first.hs.Close()
		_ = first.srv.Close()
		restarted := newHarness(t, st, core.Config{}, Config{})
		restarted.must(http.StatusOK, "POST", outcomePath(b, "lease"), map[string]any{"lease_token": b.LeaseToken}, nil)
		restarted.must(http.StatusOK, "POST", outcomePath(b, "complete"), map[string]any{"lease_token": b.LeaseToken}, nil)
	})
}

// TestLeaseSecretSurvivesReopen: on SQLite the secret is in the database
// file, so a store opened again (a restarted process) takes the tokens
// the first one issued.
func TestLeaseSecretSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "backlog.db")
	open := func() contract.Store {
		st, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st1 := open()
	h1 := newHarness(t, st1, core.Config{}, Config{})
	h1.register("w", map[string]any{"queues": []string{"default"}})
	j := h1.claimOne("w", map[string]any{"kind": "k"})
	h1.hs.Close()
	_ = h1.srv.Close()
	_ = st1.Close()

	st2 := open()
	t.Cleanup(func() { st2.Close() })
	h2 := newHarness(t, st2, core.Config{}, Config{})
	h2.must(http.StatusOK, "POST", outcomePath(j, "complete"), map[string]any{"lease_token": j.LeaseToken}, nil)
}

// noSettings hides the store's contract.Settings.
type noSettings struct{ contract.Store }

// TestLeaseSecretSources: a configured secret is shared by servers that
// are configured alike, whatever the store; a previous secret still
// verifies; a store without settings and no configured secret gets a
// secret of its process, with a warning, whose tokens another server
// refuses.
func TestLeaseSecretSources(t *testing.T) {
	st := noSettings{teststores.Memory(t)}
	secret := []byte("shared secret of every server!!!")
	a := newHarness(t, st, core.Config{}, Config{LeaseSecret: secret})
	b := newHarness(t, st, core.Config{}, Config{LeaseSecret: secret})
	a.register("w", map[string]any{"queues": []string{"default"}})
	j := a.claimOne("w", map[string]any{"kind": "k"})
	b.must(http.StatusOK, "POST", outcomePath(j, "lease"), map[string]any{"lease_token": j.LeaseToken}, nil)

	// Rotation: the new secret signs, the old one still verifies.
	rotated := newHarness(t, st, core.Config{}, Config{LeaseSecret: []byte("the new secret, also 32 bytes..."), PreviousLeaseSecrets: [][]byte{secret}})
	rotated.must(http.StatusOK, "POST", outcomePath(j, "lease"), map[string]any{"lease_token": j.LeaseToken}, nil)
	k := rotated.claimOne("w", map[string]any{"kind": "k"})
	wantProblem(t, a.do("POST", outcomePath(k, "lease"), map[string]any{"lease_token": k.LeaseToken}), SlugLeaseLost)
	// Another secret entirely: refused as stale.
	stranger := newHarness(t, st, core.Config{}, Config{LeaseSecret: []byte("a different secret of 32 bytes.!")})
	wantProblem(t, stranger.do("POST", outcomePath(j, "complete"), map[string]any{"lease_token": j.LeaseToken}), SlugLeaseLost)

	var log syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	p1 := newHarness(t, st, core.Config{}, Config{Logger: logger})
	if !strings.Contains(log.String(), "secret of this process") {
		t.Fatalf("no warning about a per-process secret:\n%s", log.String())
	}
	p2 := newHarness(t, st, core.Config{}, Config{Logger: quietLogger()})
	m := p1.claimOne("w", map[string]any{"kind": "k"})
	wantProblem(t, p2.do("POST", outcomePath(m, "complete"), map[string]any{"lease_token": m.LeaseToken}), SlugLeaseLost)
	p1.must(http.StatusOK, "POST", outcomePath(m, "complete"), map[string]any{"lease_token": m.LeaseToken}, nil)

	for name, cfg := range map[string]Config{
		"short secret":          {LeaseSecret: []byte("too short")},
		"short previous secret": {LeaseSecret: secret, PreviousLeaseSecrets: [][]byte{[]byte("short")}},
	} {
		c, err := core.NewClient(st, core.Config{Logger: quietLogger(), MaintenanceInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := New(c, cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// TestLeaseSecretStoreFailure: when the store cannot give the secret, a
// claim fails with 503 before it takes any job, and works once the store
// is back.
func TestLeaseSecretStoreFailure(t *testing.T) {
	st := &failingSettings{Store: memory.New()}
	t.Cleanup(func() { st.Close() })
	st.fail.Store(true)
	h := newHarness(t, st, core.Config{}, Config{})
	h.register("w", map[string]any{"queues": []string{"default"}})
	j := h.submit(map[string]any{"kind": "k"})
	wantProblem(t, h.do("POST", "/v1/workers/w/claim", nil), SlugUnavailable)
	if got := h.coreJob(j.ID); got.State != core.StateAvailable || got.Attempt != 0 {
		t.Fatalf("a claim that could not sign took the job: %+v", got)
	}
	st.fail.Store(false)
	if got := h.claim("w", nil); len(got) != 1 || got[0].ID != j.ID {
		t.Fatalf("claim after the store came back: %+v", got)
	}
}

// failingSettings is a memory store whose settings fail while fail is set
// (the database is down).
type failingSettings struct {
	*memory.Store
	fail atomic.Bool
}

func (s *failingSettings) GetOrCreateSetting(ctx context.Context, key string, value []byte) ([]byte, bool, error) {
	if s.fail.Load() {
		return nil, false, fmt.Errorf("settings: %w", driver.ErrBadConn)
	}
	return s.Store.GetOrCreateSetting(ctx, key, value)
}
