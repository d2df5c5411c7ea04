package storetest

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestContractNamesRealRules checks that every rule the contract's doc
// comments name ("rule insert/…", "rules a, b") is a subtest of the suite,
// so that the contract's text and the suite cannot drift apart, and that
// no two subtests share a name.
func TestContractNamesRealRules(t *testing.T) {
	names := map[string]bool{}
	for _, tc := range allTests() {
		if names[tc.name] {
			t.Errorf("two rules are named %s", tc.name)
		}
		names[tc.name] = true
	}
	files, err := filepath.Glob("../core/contract/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("read the contract's files: %v (%d files)", err, len(files))
	}
	// A rule name is a family, a slash and words joined by hyphens; the
	// contract names them after "rule" or "rules" (a list may go on over
	// comment lines and after commas); "tx/run-*" names every rule of
	// that prefix, of which there must be one.
	ruleRef := regexp.MustCompile(`\brules?\s+((?:(?://\s*)?[a-z][a-z-]*/[a-z0-9][a-z0-9-]*[a-z0-9](?:-\*)?(?:,\s*(?:and\s+)?|\s+and\s+)?)+)`)
	name := regexp.MustCompile(`[a-z][a-z-]*/[a-z0-9][a-z0-9-]*[a-z0-9](?:-\*)?`)
	cited := map[string][]string{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ruleRef.FindAllSubmatch(src, -1) {
			for _, n := range name.FindAll(m[1], -1) {
				cited[string(n)] = append(cited[string(n)], filepath.Base(f))
			}
		}
	}
	if len(cited) < 50 {
		t.Fatalf("found %d rule names in the contract; the pattern no longer reads its comments", len(cited))
	}
	var missing []string
	for n, where := range cited {
		if prefix, ok := strings.CutSuffix(n, "*"); ok {
			if !slices.ContainsFunc(slices.Collect(maps.Keys(names)), func(r string) bool { return strings.HasPrefix(r, prefix) }) {
				missing = append(missing, n+" (named in "+where[0]+")")
			}
			continue
		}
		if !names[n] {
			missing = append(missing, n+" (named in "+where[0]+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("the contract names rule %s, which the suite does not have", m)
	}
}
