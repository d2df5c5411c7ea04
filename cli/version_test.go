package cli

import (
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := mustCLI(t, "", args...)
		if !strings.HasPrefix(r.stdout, "backlog ") || !strings.Contains(r.stdout, runtime.Version()) {
			t.Errorf("%v: %q", args, r.stdout)
		}
	}
	v := decodeJSON[buildVersion](t, mustCLI(t, "", "-o", "json", "version").stdout)
	if v.Go != runtime.Version() || v.Version == "" {
		t.Errorf("json: %+v", v)
	}
	if v := newBuildVersion("v9.8.7-rc.1"); v.Version != "v9.8.7-rc.1" || v.Go != runtime.Version() {
		t.Errorf("stamped: %+v", v)
	}
	if v := newBuildVersion(""); v.Version == "" || v.Version == "v9.8.7-rc.1" {
		t.Errorf("unstamped: %+v", v)
	}
	if s := (buildVersion{Version: "v1.2.3", Revision: "0123456789abcdef", Modified: true, Time: "2026-11-24T20:00:00Z", Go: "go1.26.8"}).String(); s != "backlog v1.2.3 (0123456789ab+dirty, 2026-11-24T20:00:00Z) go1.26.8" {
		t.Errorf("String: %q", s)
	}
}
