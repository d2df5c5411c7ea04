package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
)

// Measured runs argv as a child process (another system's benchmark, say
// River's riverbench) and returns its JSON output with the CPU split of
// its run added, as backlog's own modes report it (ProcCPU): the child's
// CPU time (user + system, its waited-for children included) as the
// client's, and the CPU of srv's processes over the same span as the
// server's, per 1,000 jobs where jobs is read from the output's
// "completed" member, else its "jobs" member. The child's standard error
// goes to stderr. It fails when the child fails or its output is not one
// JSON object. The CPU figures are omitted where /proc cannot be read.
func Measured(ctx context.Context, srv Server, argv []string, stderr io.Writer) (json.RawMessage, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("bench: no command to measure")
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, stderr
	before := markProcs(srv.Procs)
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", argv[0], err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &fields); err != nil {
		return nil, fmt.Errorf("bench: %s printed no JSON object: %w", argv[0], err)
	}
	var jobs int64
	for _, k := range []string{"completed", "jobs"} {
		if v, ok := fields[k]; ok && json.Unmarshal(v, &jobs) == nil {
			break
		}
	}
	if p := before.since(srv, jobs); p != nil {
		// The child's own time, not this process's.
		client := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
		p.ClientSeconds = client
		k := 0.0
		if jobs > 0 {
			k = 1e6 / float64(jobs)
		}
		p.PerThousand.Client = client * k
		if p.ServerSeconds != nil {
			t := (client + *p.ServerSeconds) * k
			p.PerThousand.Total = &t
		}
		extra, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		var add map[string]json.RawMessage
		if err := json.Unmarshal(extra, &add); err != nil {
			return nil, err
		}
		for k, v := range add {
			fields[k] = v
		}
	}
	return json.MarshalIndent(fields, "", "  ")
}
