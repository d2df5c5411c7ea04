package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
)

// TestWorkerOpensAndSealsWithItsKeys: on a server without keys, a remote
// worker holding them gets the args a Go producer sealed, opens them for
// its handler, and seals the result and error text it reports, so the
// server and the database never see them in clear. A worker without keys
// fails such a job's attempt with a decrypt error instead of handing the
// handler ciphertext.
func TestWorkerOpensAndSealsWithItsKeys(t *testing.T) {
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		keys, err := core.NewKeyring("k1", map[string][]byte{"k1": bytes.Repeat([]byte{9}, core.KeySize)})
		if err != nil {
			t.Fatal(err)
		}
		enc := &core.Encryption{Keys: keys, Results: true, Errors: true}
		srv := startServer(t, st, core.Config{}, false)
		producer, err := core.NewClient(st, core.Config{MaintenanceInterval: -1, Logger: quiet(), Encryption: enc})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		ok, err := producer.EnqueueRaw(ctx, "ok", []byte(`{"secret":"a1"}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		bad, err := producer.EnqueueRaw(ctx, "bad", []byte(`{"secret":"a2"}`), &core.Options{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}

		var mu sync.Mutex
		seen := map[string]string{}
		w := srv.newWorker(client.WorkerConfig{Encryption: enc, Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
			mu.Lock()
			seen[j.Kind] = string(j.Args)
			mu.Unlock()
			if j.Kind == "bad" {
				return nil, errors.New("secret failure")
			}
			return json.RawMessage(`{"secret":"r1"}`), nil
		}})
		stop := runWorker(t, w)
		waitFor(t, 10*time.Second, "both jobs finished", func() bool {
			a, _ := st.Get(ctx, ok.Job.ID)
			b, _ := st.Get(ctx, bad.Job.ID)
			return a != nil && b != nil && a.State == core.StateCompleted && b.State == core.StateDiscarded
		})
		stop()
		for kind, args := range seen {
			if !strings.Contains(args, `"secret"`) {
				t.Fatalf("handler of %s saw args %s; want them opened", kind, args)
			}
		}
		a, _ := st.Get(ctx, ok.Job.ID)
		b, _ := st.Get(ctx, bad.Job.ID)
		if !contract.IsSealed(a.Result) || strings.Contains(string(a.Result), "secret") {
			t.Fatalf("stored result %s; want sealed by the worker", a.Result)
		}
		if len(b.Errors) != 1 || !contract.IsSealedText(b.Errors[0].Error) {
			t.Fatalf("stored errors %+v; want the text sealed by the worker", b.Errors)
		}
		if opened, err := keys.OpenJob(b); err != nil || opened.Errors[0].Error != "secret failure" {
			t.Fatalf("opened error %+v, %v", opened.Errors, err)
		}

		// A worker without keys.
		plain, err := producer.EnqueueRaw(ctx, "ok", []byte(`{"secret":"a3"}`), &core.Options{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		ran := false
		w2 := srv.newWorker(client.WorkerConfig{Handler: func(context.Context, *client.Job) (json.RawMessage, error) {
			ran = true
			return nil, nil
		}})
		runWorker(t, w2)
		waitFor(t, 10*time.Second, "the job discarded", func() bool {
			j, _ := st.Get(ctx, plain.Job.ID)
			return j != nil && j.State == core.StateDiscarded
		})
		j, _ := st.Get(ctx, plain.Job.ID)
		if ran || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "decrypt") {
			t.Fatalf("worker without keys: handler ran %v, errors %+v; want a decrypt error and no run", ran, j.Errors)
		}
	})
}
