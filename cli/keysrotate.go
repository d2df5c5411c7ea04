package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/backlogq/backlog/core/contract"

	"github.com/spf13/cobra"

	"github.com/backlogq/backlog/core"
)

// maxListedUnopenable bounds the jobs whose values do not open that a
// report lists one by one (all are counted).
const maxListedUnopenable = 20

// newKeysCmd is `backlog keys`: encryption keys at rest.
func (a *app) newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Encryption keys at rest: re-seal stored jobs after a key rotation",
		Args:  argsRange(0, 1),
		RunE:  helpOrUnknown,
	}
	cmd.AddCommand(a.newKeysRotateCmd())
	return cmd
}

// rotateFlags are the flags of `keys rotate`.
type rotateFlags struct {
	keys      keyFlags
	dryRun    bool
	batch     int
	maxPasses int
	interval  time.Duration
}

func (a *app) newKeysRotateCmd() *cobra.Command {
	var f rotateFlags
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Seal every stored value again with the current key, so older keys can be dropped",
		Long: `rotate seals again, with the current key (the first of the keyring given by
--keys-file or $` + keysEnv + `), every stored args, result and error text that is
sealed with another key of the keyring. Run it after the new key is current
on every node (docs/security.md, "Keys and rotation"); once it reports that
no value is left under another key, the older keys can be dropped.

It walks the jobs table in id order, a batch at a time, and never touches a
running job: running jobs, and rows that change while their batch is being
rewritten, are left alone and rewritten on a later pass. Passes repeat,
--interval apart, until no stored value is sealed with a key other than the
current one (exit 0) or --max-passes is reached (exit 1). Plain values stay
plain. Values sealed with a key missing from the keyring do not open: they
are listed by job id, keep their key, and make the command exit 1.

--dry-run changes nothing: it counts the values under other keys and checks
that they open.`,
		Example: `  backlog keys rotate --keys-file /etc/backlog/keys --dry-run
  BACKLOG_KEYS="k2=…,k1=…" backlog keys rotate
  backlog keys rotate --keys-file keys --max-passes 30 --interval 1m -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case f.batch < 1:
				return usagef("--batch must be at least 1")
			case f.maxPasses < 1:
				return usagef("--max-passes must be at least 1")
			case f.interval < 0:
				return usagef("--interval must not be negative")
			case !f.keys.given(a.env.getenv):
				return usagef("keys rotate needs the keyring: --keys-file or %s (the current key first, then every key stored values may still use)", keysEnv)
			}
			enc, err := f.keys.encryption(a.env.getenv)
			if err != nil {
				return err
			}
			return a.withStore(cmd.Context(), func(st contract.Store) error {
				rw, ok := st.(contract.SealedRewriter)
				if !ok {
					return fmt.Errorf("store %s cannot rewrite stored jobs (its adapter does not implement contract.SealedRewriter), so keys rotate cannot run on it", redactURL(a.dbURL))
				}
				return a.rotate(cmd.Context(), st, rw, enc.Keys, f)
			})
		},
	}
	fl := cmd.Flags()
	f.keys.register(fl, false)
	fl.BoolVar(&f.dryRun, "dry-run", false, "change nothing: count the values under other keys and check that they open")
	fl.IntVar(&f.batch, "batch", 100, "jobs read and rewritten per transaction")
	fl.IntVar(&f.maxPasses, "max-passes", 10, "give up (exit 1) after this many passes over the table")
	fl.DurationVar(&f.interval, "interval", 10*time.Second, "wait between passes, for running jobs to finish")
	return cmd
}

// rotatePass is what one pass over the table did.
type rotatePass struct {
	Pass      int `json:"pass"`
	Read      int `json:"read"`      // jobs not running that the pass read
	Rewritten int `json:"rewritten"` // jobs it wrote
	// ChangedMeanwhile counts jobs that changed between the read and the
	// write of their batch (claimed, finished, cancelled…): left for the
	// next pass.
	ChangedMeanwhile int `json:"changed_meanwhile"`
	Unopenable       int `json:"unopenable"` // jobs whose values did not open
}

// keyCensus counts the stored values sealed with a key other than the
// current one.
type keyCensus struct {
	Jobs    int            `json:"jobs"`     // jobs in the table
	OldJobs int            `json:"old_jobs"` // jobs holding such values
	Running int            `json:"running"`  // of those, running (rewritten once they stop)
	Values  int            `json:"values"`   // such values: args, results, error texts
	ByKey   map[string]int `json:"by_key"`   // values per key id ("(malformed)": no valid key id)
	// Unopenable counts the jobs, not running, holding such values that
	// do not open with the keyring; Failures lists the first of them.
	Unopenable int                `json:"unopenable"`
	Failures   []unopenableReport `json:"failures,omitempty"`
}

// unopenableReport is one job whose sealed values do not open.
type unopenableReport struct {
	ID    int64  `json:"id"`
	Error string `json:"error"`
}

// rotateReport is the JSON output of `keys rotate`.
type rotateReport struct {
	CurrentKey string       `json:"current_key"`
	DryRun     bool         `json:"dry_run"`
	Passes     []rotatePass `json:"passes"`
	// Remaining is the census after the last pass (with --dry-run, the
	// only one): what is still sealed with other keys.
	Remaining keyCensus `json:"remaining"`
	Done      bool      `json:"done"` // no value is left under another key
}

// rotate runs the passes and the census after each, and reports.
func (a *app) rotate(ctx context.Context, st contract.Store, rw contract.SealedRewriter, ring *core.Keyring, f rotateFlags) error {
	rep := rotateReport{CurrentKey: ring.Current(), DryRun: f.dryRun, Passes: []rotatePass{}}
	if f.dryRun {
		c, err := census(ctx, st, ring)
		if err != nil {
			return err
		}
		rep.Remaining, rep.Done = c, c.OldJobs == 0
		if a.jsonOutput() {
			return writeJSON(a.env.stdout, rep)
		}
		fmt.Fprintf(a.env.stdout, "dry run: %s; %s\n", nOf(c.Jobs, "job"), describeCensus(c, ring.Current()))
		a.printFailures(c)
		return nil
	}
	for pass := 1; ; pass++ {
		p, err := rotatePassOver(ctx, rw, ring, pass, f.batch)
		if err != nil {
			return err
		}
		c, err := census(ctx, st, ring)
		if err != nil {
			return err
		}
		rep.Passes, rep.Remaining, rep.Done = append(rep.Passes, p), c, c.OldJobs == 0
		if !a.jsonOutput() {
			fmt.Fprintf(a.env.stdout, "pass %d: %s read, %d rewritten, %d changed meanwhile, %d not openable; %s\n",
				pass, nOf(p.Read, "job"), p.Rewritten, p.ChangedMeanwhile, p.Unopenable, describeCensus(c, ring.Current()))
		}
		// Stop when done, when only values that do not open are left (no
		// pass changes them), or at the bound.
		if rep.Done || c.OldJobs == c.Unopenable || pass == f.maxPasses {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(f.interval):
		}
	}
	if a.jsonOutput() {
		if err := writeJSON(a.env.stdout, rep); err != nil {
			return err
		}
	} else {
		a.printFailures(rep.Remaining)
	}
	c := rep.Remaining
	switch {
	case rep.Done:
		if !a.jsonOutput() {
			fmt.Fprintf(a.env.stdout, "done: no stored value is sealed with a key other than %s\n", ring.Current())
		}
		return nil
	case c.Unopenable > 0:
		return fmt.Errorf("values of %s do not open with this keyring (add the keys they name, or leave them under those keys); %s in all still under other keys", nOf(c.Unopenable, "job"), nOf(c.OldJobs, "job"))
	default:
		return fmt.Errorf("stopped after %s with %s still under other keys (%d running): run keys rotate again once they finish", nOf(len(rep.Passes), "pass"), nOf(c.OldJobs, "job"), c.Running)
	}
}

// rotatePassOver walks the whole table once with RewriteSealed, resealing
// every value under another key.
func rotatePassOver(ctx context.Context, rw contract.SealedRewriter, ring *core.Keyring, pass, batch int) (rotatePass, error) {
	p := rotatePass{Pass: pass}
	after := int64(0)
	for {
		planned := 0
		last, n, err := rw.RewriteSealed(ctx, after, batch, func(j *core.Job) (*core.Job, bool, error) {
			p.Read++
			if len(oldKeys(ring, j)) == 0 {
				return j, false, nil
			}
			if err := resealJob(ring, j); err != nil {
				p.Unopenable++
				return j, false, nil
			}
			planned++
			return j, true, nil
		})
		if err != nil {
			return p, fmt.Errorf("keys rotate: pass %d, jobs after id %d: %w", pass, after, err)
		}
		p.Rewritten += n
		p.ChangedMeanwhile += planned - n
		if last == after {
			return p, nil
		}
		after = last
	}
}

// resealJob seals j's args, result and error texts that are sealed with
// another key again with the current key, in place. Plain values stay
// plain. On error j may be half changed; the caller does not write it.
func resealJob(ring *core.Keyring, j *core.Job) error {
	if contract.IsSealed(j.Args) {
		args, _, err := ring.ResealArgs(j.Kind, j.Args)
		if err != nil {
			return err
		}
		j.Args = args
	}
	if j.Result != nil && contract.IsSealed(j.Result) {
		res, _, err := ring.ResealResult(j.Kind, j.Result)
		if err != nil {
			return err
		}
		j.Result = res
	}
	for i, e := range j.Errors {
		// One text at a time: a plain message beside a sealed trace (or
		// the other way round) stays plain.
		if contract.IsSealedText(e.Error) {
			re, _, err := ring.ResealAttemptError(core.AttemptError{Error: e.Error})
			if err != nil {
				return err
			}
			j.Errors[i].Error = re.Error
		}
		if contract.IsSealedText(e.Trace) {
			re, _, err := ring.ResealAttemptError(core.AttemptError{Trace: e.Trace})
			if err != nil {
				return err
			}
			j.Errors[i].Trace = re.Trace
		}
	}
	return nil
}

// oldKeys returns the key id of each value of j sealed with a key other
// than the ring's current one ("(malformed)" for a sealed value that
// names no valid key id).
func oldKeys(ring *core.Keyring, j *core.Job) []string {
	var out []string
	check := func(v []byte, sealed bool) {
		if !sealed {
			return
		}
		kid, ok := core.SealedKeyID(v)
		switch {
		case !ok:
			out = append(out, "(malformed)")
		case kid != ring.Current():
			out = append(out, kid)
		}
	}
	check(j.Args, contract.IsSealed(j.Args))
	check(j.Result, j.Result != nil && contract.IsSealed(j.Result))
	for _, e := range j.Errors {
		check([]byte(e.Error), contract.IsSealedText(e.Error))
		check([]byte(e.Trace), contract.IsSealedText(e.Trace))
	}
	return out
}

// census reads every job (List, all states) and counts the values sealed
// with another key; for jobs not running it checks that they open.
func census(ctx context.Context, st contract.Store, ring *core.Keyring) (keyCensus, error) {
	c := keyCensus{ByKey: map[string]int{}}
	after := int64(0)
	for {
		jobs, err := st.List(ctx, core.ListParams{AfterID: after, Limit: 1000})
		if err != nil {
			return c, fmt.Errorf("keys rotate: list jobs after id %d: %w", after, err)
		}
		for _, j := range jobs {
			c.Jobs++
			old := oldKeys(ring, j)
			if len(old) == 0 {
				continue
			}
			c.OldJobs++
			c.Values += len(old)
			for _, kid := range old {
				c.ByKey[kid]++
			}
			if j.State == core.StateRunning {
				c.Running++
				continue
			}
			if err := resealJob(ring, j); err != nil {
				c.Unopenable++
				if len(c.Failures) < maxListedUnopenable {
					c.Failures = append(c.Failures, unopenableReport{ID: j.ID, Error: err.Error()})
				}
			}
		}
		if len(jobs) < 1000 {
			return c, nil
		}
		after = jobs[len(jobs)-1].ID
	}
}

// describeCensus says what is still sealed with other keys.
func describeCensus(c keyCensus, current string) string {
	if c.OldJobs == 0 {
		return "no value is sealed with a key other than " + current
	}
	keys := slices.Sorted(maps.Keys(c.ByKey))
	by := make([]string, len(keys))
	for i, k := range keys {
		by[i] = fmt.Sprintf("%s: %d", k, c.ByKey[k])
	}
	return fmt.Sprintf("%s in %s sealed with keys other than %s (%s), %d of the jobs running",
		nOf(c.Values, "value"), nOf(c.OldJobs, "job"), current, strings.Join(by, ", "), c.Running)
}

// nOf is "1 job", "2 jobs", "3 passes".
func nOf(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "s"):
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// printFailures lists the jobs whose values do not open, on stderr.
func (a *app) printFailures(c keyCensus) {
	for _, f := range c.Failures {
		fmt.Fprintf(a.env.stderr, "backlog: job %d: %s\n", f.ID, printable(f.Error, ""))
	}
	if more := c.Unopenable - len(c.Failures); more > 0 {
		fmt.Fprintf(a.env.stderr, "backlog: … and %s more whose values do not open\n", nOf(more, "job"))
	}
}
