//go:build !linux

package cli

// hideProcessSecrets does nothing here: the command line stays visible to
// every local user (ps) and, on some systems, the environment to processes
// of the same user (ps e). Pass secrets in the environment or in files,
// and run handlers as another user (docs/security.md).
func hideProcessSecrets(argv []string, secrets []string) error { return nil }
