package cli

import (
	"bufio"
	"bytes"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/backlogq/backlog/adapters/httpapi"
)

// authFlags are serve's flags for the lease-token secret and per-worker
// tokens (docs/security.md, "Lease tokens and worker identity").
type authFlags struct {
	leaseSecret     string
	leaseSecretFile string
	workerCreds     []string // NAME=TOKEN
	workerCredsFile string

	// Resolved by resolve.
	secret       []byte
	previous     [][]byte
	workerTokens map[string]string
}

func (a *authFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&a.leaseSecret, "lease-secret", "", "secret (at least 32 bytes) that signs lease tokens, the same on every server of one database (env BACKLOG_LEASE_SECRET); unset: a secret kept in the database")
	fl.StringVar(&a.leaseSecretFile, "lease-secret-file", "", "file whose first line is the lease secret and whose further lines are previous secrets still accepted while rotating (env BACKLOG_LEASE_SECRET_FILE)")
	fl.StringArrayVar(&a.workerCreds, "worker-credential", nil, "per-worker bearer token NAME=TOKEN (repeatable): a worker id registered with it cannot be used with any other token but the admin token")
	fl.StringVar(&a.workerCredsFile, "worker-credentials-file", "", "file of per-worker tokens, one NAME=TOKEN a line (env BACKLOG_WORKER_CREDENTIALS_FILE)")
}

// resolve reads the environment where the flags were not given, then the
// files, and checks everything httpapi.New would refuse.
func (a *authFlags) resolve(fl *pflag.FlagSet, getenv func(string) string) error {
	env := func(flag, name string, dst *string) {
		if !fl.Changed(flag) && getenv != nil {
			if v := getenv(name); v != "" {
				*dst = v
			}
		}
	}
	env("lease-secret", "BACKLOG_LEASE_SECRET", &a.leaseSecret)
	env("lease-secret-file", "BACKLOG_LEASE_SECRET_FILE", &a.leaseSecretFile)
	env("worker-credentials-file", "BACKLOG_WORKER_CREDENTIALS_FILE", &a.workerCredsFile)

	a.secret, a.previous = nil, nil
	switch {
	case a.leaseSecret != "" && a.leaseSecretFile != "":
		return usagef("--lease-secret and --lease-secret-file both given; use one")
	case a.leaseSecret != "":
		a.secret = []byte(a.leaseSecret)
	case a.leaseSecretFile != "":
		lines, err := readLines(a.leaseSecretFile)
		if err != nil {
			return usagef("--lease-secret-file: %v", err)
		}
		if len(lines) == 0 {
			return usagef("--lease-secret-file %s holds no secret", a.leaseSecretFile)
		}
		a.secret = []byte(lines[0])
		for _, l := range lines[1:] {
			a.previous = append(a.previous, []byte(l))
		}
	}
	if a.secret != nil && len(a.secret) < httpapi.MinLeaseSecretBytes {
		return usagef("the lease secret is %d bytes; want at least %d (for example: openssl rand -hex 32)", len(a.secret), httpapi.MinLeaseSecretBytes)
	}
	for i, p := range a.previous {
		if len(p) < httpapi.MinLeaseSecretBytes {
			return usagef("--lease-secret-file: previous secret %d is %d bytes; want at least %d", i+1, len(p), httpapi.MinLeaseSecretBytes)
		}
	}

	a.workerTokens = nil
	creds := append([]string(nil), a.workerCreds...)
	if a.workerCredsFile != "" {
		lines, err := readLines(a.workerCredsFile)
		if err != nil {
			return usagef("--worker-credentials-file: %v", err)
		}
		creds = append(creds, lines...)
	}
	for _, c := range creds {
		name, tok, ok := strings.Cut(c, "=")
		name, tok = strings.TrimSpace(name), strings.TrimSpace(tok)
		if !ok || name == "" || tok == "" {
			return usagef("worker credential %q: want NAME=TOKEN", redact(c))
		}
		if _, dup := a.workerTokens[name]; dup {
			return usagef("worker credential %q given twice", name)
		}
		if a.workerTokens == nil {
			a.workerTokens = map[string]string{}
		}
		a.workerTokens[name] = tok
	}
	return nil
}

// apply sets the resolved values in cfg.
func (a *authFlags) apply(cfg *httpapi.Config) {
	cfg.LeaseSecret, cfg.PreviousLeaseSecrets, cfg.WorkerTokens = a.secret, a.previous, a.workerTokens
}

// readLines returns the lines of the file at path that are neither blank
// nor comments ('#'), trimmed.
func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// redact shows what precedes '=' in a malformed credential, never a token.
func redact(c string) string {
	if name, _, ok := strings.Cut(c, "="); ok {
		return name + "=…"
	}
	return "…"
}
