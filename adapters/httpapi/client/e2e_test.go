//go:build unix

package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backlogq/backlog/adapters/httpapi/client"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/syncbuf"
	"github.com/backlogq/backlog/internal/teststores"
)

// helperEnv makes the test binary run a remote worker instead of tests.
const helperEnv = "BACKLOG_CLIENT_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "worker" {
		os.Exit(helperWorker())
	}
	os.Exit(m.Run())
}

// helperWorker runs a client.Worker whose handler blocks until its context
// ends, against BACKLOG_URL as WORKER_ID, until killed.
func helperWorker() int {
	c, err := client.New(os.Getenv("BACKLOG_URL"), client.WithToken(workerToken), client.WithLogger(quiet()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w, err := client.NewWorker(c, client.WorkerConfig{
		ID: os.Getenv("WORKER_ID"), Queues: []string{"default"}, Concurrency: 5, WaitSeconds: 1, Logger: quiet(),
		Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// curlWorker is examples/http/curl-worker.sh running as a subprocess.
type curlWorker struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	done   chan error
}

func startCurlWorker(t *testing.T, url, id string, handler string) *curlWorker {
	t.Helper()
	script, err := filepath.Abs("../../../examples/http/curl-worker.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", script, "sh", "-c", handler)
	cmd.Env = append(os.Environ(), "BACKLOG_URL="+url, "BACKLOG_TOKEN="+workerToken, "QUEUE=default", "WORKER_ID="+id, "WAIT_SECONDS=2")
	cw := &curlWorker{cmd: cmd, stderr: &syncbuf.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = cw.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cw.done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-cw.done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-cw.done
		}
		if t.Failed() {
			t.Logf("curl worker stderr:\n%s", cw.stderr)
		}
	})
	return cw
}

// stop sends SIGTERM and waits for a clean exit.
func (cw *curlWorker) stop(t *testing.T) {
	t.Helper()
	_ = cw.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-cw.done:
		cw.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("curl worker exited with %v\n%s", err, cw.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("curl worker did not stop on SIGTERM\n%s", cw.stderr)
	}
}

// drainArgs are the args of the drain test's jobs.
type drainArgs struct {
	I    int    `json:"i"`
	Mode string `json:"mode"` // ok, flaky (fails its first attempt), always (always fails)
}

func drainMode(i int) string {
	switch {
	case i%100 == 3:
		return "always"
	case i%7 == 0:
		return "flaky"
	}
	return "ok"
}

// curlHandler is the curl worker's command: it fails as the args say.
const curlHandler = `read -r args
case "$args" in
*'"always"'*) echo "always fails" >&2; exit 3 ;;
*'"flaky"'*) if [ "$BACKLOG_JOB_ATTEMPT" = 1 ]; then echo "flaky first try" >&2; exit 3; fi ;;
esac
echo "done $BACKLOG_JOB_ID"`

// TestDrain: a producer submits 1,000 jobs through the API (batches and
// singles); a Go worker and the curl worker drain them. Every 7th job fails
// its first attempt, every 100th (from 3) always fails and is discarded
// after its 2 attempts.
func TestDrain(t *testing.T) {
	t.Parallel()
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		s := startServer(t, st, core.Config{Retry: core.DelayList{10 * time.Millisecond}}, false)
		ctx := context.Background()
		const n = 1000
		req := func(i int) client.SubmitRequest {
			args, _ := json.Marshal(drainArgs{I: i, Mode: drainMode(i)})
			r := client.SubmitRequest{Kind: "task", Args: args}
			if drainMode(i) == "always" {
				r.MaxAttempts = 2
			}
			return r
		}
		batch := func(from, to int) {
			var rs []client.SubmitRequest
			for i := from; i < to; i++ {
				rs = append(rs, req(i))
			}
			if _, err := s.producer.SubmitBatch(ctx, rs); err != nil {
				t.Fatal(err)
			}
		}
		for from := 0; from < 300; from += 100 {
			batch(from, from+100)
		}
		for i := 300; i < 400; i++ {
			if _, err := s.producer.Submit(ctx, req(i)); err != nil {
				t.Fatal(err)
			}
		}
		for from := 400; from < n; from += 200 {
			batch(from, from+200)
		}

		// The curl worker starts first and must finish a job before the Go
		// worker joins, so both do some of the work.
		cw := startCurlWorker(t, s.URL, "curl-worker", curlHandler)
		waitFor(t, 30*time.Second, "the curl worker's first job", func() bool {
			page, err := s.producer.ListJobs(ctx, client.ListParams{States: []core.State{core.StateCompleted}, Limit: 1})
			return err == nil && len(page.Jobs) > 0
		})
		gw := s.newWorker(client.WorkerConfig{ID: "go-worker", Concurrency: 4, WaitSeconds: 2,
			Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
				var a drainArgs
				if err := json.Unmarshal(j.Args, &a); err != nil {
					return nil, core.Permanent(err)
				}
				switch {
				case a.Mode == "always":
					return nil, fmt.Errorf("always fails")
				case a.Mode == "flaky" && j.Attempt == 1:
					return nil, fmt.Errorf("flaky first try")
				}
				return json.Marshal(map[string]int{"i": a.I})
			}})
		stopGo := runWorker(t, gw)
		deadline := time.Now().Add(90 * time.Second)
		for {
			c := s.counts()
			if c[core.StateCompleted]+c[core.StateDiscarded] == n {
				break
			}
			if time.Now().After(deadline) {
				var stuck []string
				for _, j := range s.allJobs() {
					if !j.State.Final() {
						stuck = append(stuck, fmt.Sprintf("#%d %s attempt %d worker %s errors %v", j.ID, j.State, j.Attempt, j.WorkerID, j.Errors))
					}
				}
				t.Fatalf("timed out waiting for every job to be final: counts %v; go worker running %d\n%s", c, len(gw.Running()), strings.Join(stuck, "\n"))
			}
			time.Sleep(10 * time.Millisecond)
		}
		cw.stop(t)
		stopGo()

		jobs := s.allJobs()
		if len(jobs) != n {
			t.Fatalf("%d jobs", len(jobs))
		}
		by := map[string]int{}
		wantDiscarded := 0
		for _, j := range jobs {
			var a drainArgs
			if err := json.Unmarshal(j.Args, &a); err != nil {
				t.Fatal(err)
			}
			for k, e := range j.Errors {
				if e.Attempt != k+1 {
					t.Fatalf("job %d (%s): error entries %+v", j.ID, a.Mode, j.Errors)
				}
			}
			switch a.Mode {
			case "always":
				wantDiscarded++
				if j.State != core.StateDiscarded || j.Attempt != 2 || len(j.Errors) != 2 ||
					!strings.Contains(j.Errors[0].Error, "always fails") || !strings.Contains(j.Errors[1].Error, "always fails") {
					t.Fatalf("job %d (always): %s attempt %d errors %+v", j.ID, j.State, j.Attempt, j.Errors)
				}
				continue
			case "flaky":
				if j.State != core.StateCompleted || j.Attempt != 2 || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "flaky first try") {
					t.Fatalf("job %d (flaky): %s attempt %d errors %+v", j.ID, j.State, j.Attempt, j.Errors)
				}
			default:
				if j.State != core.StateCompleted || j.Attempt != 1 || len(j.Errors) != 0 {
					t.Fatalf("job %d (ok): %s attempt %d errors %+v", j.ID, j.State, j.Attempt, j.Errors)
				}
			}
			by[j.WorkerID]++
			switch j.WorkerID {
			case "go-worker":
				if string(j.Result) != fmt.Sprintf(`{"i":%d}`, a.I) {
					t.Fatalf("job %d: Go worker's result %s", j.ID, j.Result)
				}
			case "curl-worker":
				var out string
				if err := json.Unmarshal(j.Result, &out); err != nil || out != fmt.Sprintf("done %d\n", j.ID) {
					t.Fatalf("job %d: curl worker's result %s", j.ID, j.Result)
				}
				if a.Mode == "flaky" && !strings.HasPrefix(j.Errors[0].Error, "exit status 3: ") && j.Errors[0].Error != "flaky first try" {
					t.Fatalf("job %d: error %+v", j.ID, j.Errors[0])
				}
			default:
				t.Fatalf("job %d completed by %q", j.ID, j.WorkerID)
			}
		}
		c := s.counts()
		if wantDiscarded != 10 || c[core.StateDiscarded] != 10 || c[core.StateCompleted] != n-10 ||
			c[core.StateRunning]+c[core.StateAvailable]+c[core.StateRetryable]+c[core.StateScheduled] != 0 {
			t.Fatalf("counts %v", c)
		}
		if by["go-worker"] == 0 || by["curl-worker"] == 0 {
			t.Fatalf("completed per worker: %v", by)
		}
		t.Logf("completed per worker: %v", by)
		if ws, err := s.admin.Workers(ctx); err != nil || len(ws) != 0 {
			t.Fatalf("workers left registered: %v %+v", err, ws)
		}
	})
}

// TestKilledWorker: a remote worker killed with SIGKILL mid-job stops
// heartbeating; maintenance declares it dead after WorkerDeadAfter, hands
// its jobs back (the lease is an hour, so only death detection can), and a
// surviving worker completes them.
func TestKilledWorker(t *testing.T) {
	t.Parallel()
	teststores.Run(t, func(t *testing.T, st contract.Store) {
		s := startServer(t, st, core.Config{
			HeartbeatInterval: 500 * time.Millisecond, WorkerStaleAfter: time.Second, WorkerDeadAfter: 2 * time.Second,
			LeaseDuration: time.Hour, MaintenanceInterval: 200 * time.Millisecond,
		}, true)
		ctx := context.Background()
		var ids []int64
		for range 3 {
			r, err := s.producer.Submit(ctx, client.SubmitRequest{Kind: "block"})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.Job.ID)
		}

		const victim = "victim-worker"
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=worker", "BACKLOG_URL="+s.URL, "WORKER_ID="+victim)
		var stderr syncbuf.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waited := false
		t.Cleanup(func() {
			if !waited {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
		waitFor(t, 30*time.Second, "the victim to run every job", func() bool {
			for _, id := range ids {
				if j := s.job(id); j.State != core.StateRunning || j.WorkerID != victim {
					return false
				}
			}
			return true
		})
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		waited = true

		survivor := s.newWorker(client.WorkerConfig{ID: "survivor", WaitSeconds: 1,
			Handler: func(ctx context.Context, j *client.Job) (json.RawMessage, error) {
				return json.RawMessage(`"survived"`), nil
			}})
		runWorker(t, survivor)
		waitFor(t, 30*time.Second, "the survivor to complete every job", func() bool {
			for _, id := range ids {
				if s.job(id).State != core.StateCompleted {
					return false
				}
			}
			return true
		})
		for _, id := range ids {
			j := s.job(id)
			if j.WorkerID != "survivor" || j.Attempt != 2 || len(j.Errors) != 1 || j.Errors[0].Attempt != 1 || j.Errors[0].Cause != core.CauseWorkerDead ||
				!strings.HasPrefix(j.Errors[0].Error, "worker "+victim+" lost: no heartbeat since ") {
				t.Fatalf("job %d: worker %s attempt %d errors %+v\nvictim stderr:\n%s", id, j.WorkerID, j.Attempt, j.Errors, &stderr)
			}
		}
		waitFor(t, 20*time.Second, "the dead worker's record to go", func() bool {
			ws, err := s.admin.Workers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				if w.ID == victim {
					return false
				}
			}
			return true
		})
	})
}
