package cli

import (
	"strings"
	"testing"
)

func TestTyposGetSuggestions(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"jbos":                  "Did you mean this?\n  jobs",
		"queues pasue":          "Did you mean this?\n  pause",
		"cron --config x pasue": "Did you mean this?\n  pause",
	} {
		r := cli(t, "", strings.Fields(args)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: %s", args, r)
		}
	}
}
