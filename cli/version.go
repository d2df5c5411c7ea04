package cli

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// buildVersion describes this binary from its build info: the module
// version (or "(devel)" for a build from a checkout), the VCS revision
// and time when the build recorded them ("+dirty" for uncommitted
// changes), and the Go version.
type buildVersion struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// version is the release version stamped at link time by scripts/release.sh
// and the Dockerfile, such as "v1.2.3":
//
//	go build -ldflags "-X github.com/backlogq/backlog/cli.version=v1.2.3" ./cmd/backlog
//
// Empty (the default, as for `go install` and `go run`): `backlog version`
// reports the module version from the build info instead. It is set only
// by the linker and never written at run time.
var version string

// readBuildVersion describes this binary, with the stamped version when the
// linker set one.
func readBuildVersion() buildVersion { return newBuildVersion(version) }

// newBuildVersion describes this binary from its build info; stamped, when
// not empty, replaces the module version (which is "(devel)" for a build
// from a checkout). Without build info the version is stamped, or
// "unknown".
func newBuildVersion(stamped string) buildVersion {
	v := buildVersion{Version: "unknown"}
	if stamped != "" {
		v.Version = stamped
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Module, v.Go = bi.Main.Path, bi.GoVersion
	if stamped == "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one-line form: "backlog v1.2.3 (abc123def456, 2026-11-24T20:00:00Z) go1.26.8".
func (v buildVersion) String() string {
	var extra []string
	if v.Revision != "" {
		rev := v.Revision[:min(12, len(v.Revision))]
		if v.Modified {
			rev += "+dirty"
		}
		extra = append(extra, rev)
	}
	if v.Time != "" {
		extra = append(extra, v.Time)
	}
	s := "backlog " + v.Version
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	if v.Go != "" {
		s += " " + v.Go
	}
	return s
}

func (a *app) newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := readBuildVersion()
			if a.jsonOutput() {
				return writeJSON(a.env.stdout, v)
			}
			_, err := fmt.Fprintln(a.env.stdout, v)
			return err
		},
	}
}
