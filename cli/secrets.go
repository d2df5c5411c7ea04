package cli

import (
	"github.com/spf13/cobra"
)

// secretFlags are the flags whose values are credentials: store URLs carry
// passwords, the rest are tokens and signing secrets. Their values are
// hidden from the process's command line once parsed (hideSecrets).
var secretFlags = []string{
	"db", "token", "admin-token", "producer-token", "worker-token", "metrics-token",
	"lease-secret", "webhook-secret",
}

// hideSecrets keeps a work or serve process's credentials from the shell
// handlers it runs (docs/security.md, "Shell handlers and the server's
// secrets"): a handler's parent is this process, and /proc/<pid>/environ
// and /proc/<pid>/cmdline would otherwise show it every token and the
// database URL, whatever the handler environment's allow-list says. It
// hands the values of the secret flags given on the command line to
// env.hideSecrets (on Linux: the process becomes non-dumpable, and those
// values and every BACKLOG_* variable are overwritten in the memory the
// kernel shows as cmdline and environ). Failing, it logs a warning and the
// process runs on. Call it before any handler starts.
func (a *app) hideSecrets(cmd *cobra.Command) {
	if a.env.hideSecrets == nil {
		return
	}
	var secrets []string
	for _, name := range secretFlags {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			if v := f.Value.String(); v != "" {
				secrets = append(secrets, v)
			}
		}
	}
	if err := a.env.hideSecrets(secrets); err != nil && a.log != nil {
		a.log.Warn("shell handlers may read this process's secrets in /proc", "err", err)
	}
}
