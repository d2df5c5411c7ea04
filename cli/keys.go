package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/backlogq/backlog/core"
)

// keysEnv holds a keyring in core.ParseKeyring's text form
// ("id=base64key,id2=base64key2", current key first) when --keys-file is
// not given. Handlers never see it (shell.go, passedEnv).
const keysEnv = "BACKLOG_KEYS"

// keyFlags are the encryption-at-rest flags of enqueue and work
// (docs/security.md): enqueue seals args, work opens them for its handlers
// and seals what it writes back.
type keyFlags struct {
	file          string
	results       bool // work only
	errors        bool // work only
	requireSealed bool // work only
}

// register adds --keys-file, and for a worker the --encrypt-* flags.
func (k *keyFlags) register(fl *pflag.FlagSet, worker bool) {
	fl.StringVar(&k.file, "keys-file", "", "encryption keys for args at rest: a file holding id=base64key[,id2=base64key2…] (newest key first; env "+keysEnv+" holds the same text)")
	if !worker {
		return
	}
	fl.BoolVar(&k.results, "encrypt-results", false, "with keys: also seal job results")
	fl.BoolVar(&k.errors, "encrypt-errors", false, "with keys: also seal the text of error entries")
	fl.BoolVar(&k.requireSealed, "require-sealed", false, "with keys: fail jobs whose args are not sealed")
}

// given reports whether keys were asked for, by flag or environment.
func (k *keyFlags) given(getenv func(string) string) bool {
	return k.file != "" || (getenv != nil && getenv(keysEnv) != "")
}

// encryption returns the engine's Encryption for the flags: nil when no
// keys were given (and no --encrypt-* flag either). Errors are usage
// errors; they never quote key material.
func (k *keyFlags) encryption(getenv func(string) string) (*core.Encryption, error) {
	if !k.given(getenv) {
		if k.results || k.errors || k.requireSealed {
			return nil, usagef("--encrypt-results, --encrypt-errors and --require-sealed need keys (--keys-file or %s)", keysEnv)
		}
		return nil, nil
	}
	spec, from := "", keysEnv
	if k.file != "" {
		b, err := os.ReadFile(k.file)
		if err != nil {
			return nil, usagef("--keys-file: %v", err)
		}
		// One entry per line or comma-separated; # starts a comment line.
		var entries []string
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				entries = append(entries, line)
			}
		}
		spec, from = strings.Join(entries, ","), "--keys-file "+k.file
	} else {
		spec = getenv(keysEnv)
	}
	ring, err := core.ParseKeyring(spec)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", from, err)}
	}
	return &core.Encryption{Keys: ring, Results: k.results, Errors: k.errors, RequireSealed: k.requireSealed}, nil
}
