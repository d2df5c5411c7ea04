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

func readBuildVersion() buildVersion {
	v := buildVersion{Version: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Module, v.Version, v.Go = bi.Main.Path, bi.Main.Version, bi.GoVersion
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
