package cli

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// productionDoc is the production guide whose settings table
// TestProductionSettingsTable keeps in sync with serve and work.
const productionDoc = "../docs/production.md"

// settingRow is one row of the settings table of docs/production.md.
type settingRow struct {
	line     int
	flag     string   // without the leading --; "" for none
	key      string   // config-file key path (queues.*.max_workers); "" for none
	env      []string // environment variables
	commands []string // serve, work
}

var (
	cellFlag = regexp.MustCompile("`--([a-z0-9-]+)`")
	cellKey  = regexp.MustCompile("`([a-z0-9_.*]+)`")
	cellEnv  = regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")
)

// settingsTable parses the table between <!-- settings:begin --> and
// <!-- settings:end --> in doc: | flag | config key | environment |
// commands | default | meaning |.
func settingsTable(t *testing.T, doc string) []settingRow {
	t.Helper()
	begin := strings.Index(doc, "<!-- settings:begin -->")
	end := strings.Index(doc, "<!-- settings:end -->")
	if begin < 0 || end < begin {
		t.Fatalf("%s has no <!-- settings:begin --> … <!-- settings:end --> table", productionDoc)
	}
	first := strings.Count(doc[:begin], "\n") + 1
	var rows []settingRow
	for i, line := range strings.Split(doc[begin:end], "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| flag ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 6 {
			t.Fatalf("%s:%d: %d cells, want 6 (flag, config key, environment, commands, default, meaning): %s", productionDoc, first+i, len(cells), line)
		}
		r := settingRow{line: first + i}
		if m := cellFlag.FindAllStringSubmatch(cells[0], -1); len(m) == 1 {
			r.flag = m[0][1]
		} else if len(m) > 1 {
			t.Errorf("%s:%d: one flag a row: %s", productionDoc, r.line, cells[0])
		}
		if m := cellKey.FindAllStringSubmatch(cells[1], -1); len(m) == 1 {
			r.key = m[0][1]
		} else if len(m) > 1 {
			t.Errorf("%s:%d: one config key a row: %s", productionDoc, r.line, cells[1])
		}
		for _, m := range cellEnv.FindAllStringSubmatch(cells[2], -1) {
			r.env = append(r.env, m[1])
		}
		for _, c := range strings.Split(cells[3], ",") {
			if c = strings.TrimSpace(c); c != "" {
				r.commands = append(r.commands, c)
			}
		}
		if r.flag == "" && r.key == "" && len(r.env) == 0 {
			t.Errorf("%s:%d: a row names no flag, key or variable: %s", productionDoc, r.line, line)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: the settings table has no rows", productionDoc)
	}
	return rows
}

// configKeys returns the JSON keys of the config file, as dotted paths:
// a map's entries are written *, and types that decode themselves
// (durations, commands, retry policies) are leaves. Only leaves are
// returned (queues.*.max_workers, not queues).
func configKeys(typ reflect.Type, prefix string, out *[]string) {
	unmarshaler := reflect.TypeFor[json.Unmarshaler]()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		path := prefix + name
		ft := f.Type
		if reflect.PointerTo(ft).Implements(unmarshaler) || ft.Implements(unmarshaler) {
			*out = append(*out, path)
			continue
		}
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			configKeys(ft, path+".", out)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			configKeys(ft.Elem(), path+".*.", out)
		default:
			*out = append(*out, path)
		}
	}
}

// envNames returns the environment variable names (BACKLOG_*, OTEL_*)
// that the non-test sources of this package hold as string constants, and
// the text of those sources.
func envNames(t *testing.T) (map[string]bool, string) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^(BACKLOG|OTEL)_[A-Z0-9_]*[A-Z0-9]$`)
	lits := map[string]bool{}
	var text strings.Builder
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text.Write(b)
		file, err := parser.ParseFile(fset, f, b, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && name.MatchString(s) {
					lits[s] = true
				}
			}
			return true
		})
	}
	return lits, text.String()
}

// Variables the code reads that are not settings of serve or work.
var notServeWorkEnv = map[string]string{
	"BACKLOG_SERVER":                  "the job server of the other commands; serve and work refuse it (work takes --server)",
	"BACKLOG_INTERNAL_GROUP_WATCHDOG": "internal: set by backlog for its own handler watchdog",
	"BACKLOG_CONTINUE_FILE":           "set for shell handlers (docs/cli.md), not read",
	"BACKLOG_PROGRESS_FILE":           "set for shell handlers (docs/cli.md, docs/progress.md), not read",
	"BACKLOG_JOB_CHECKPOINT":          "set for shell handlers (docs/progress.md), not read",
}

// docs/production.md lists every setting of serve and work in one table:
// every flag of both commands (with the commands that have it), every key
// of the config file (cli/config.go's fileConfig, nested keys as
// queues.*.max_workers) and every environment variable the code reads.
// The table names nothing that does not exist, a flag's variable is the
// one its help names, and every flag whose help names a variable has it in
// its row.
func TestProductionSettingsTable(t *testing.T) {
	b, err := os.ReadFile(productionDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := settingsTable(t, string(b))

	e, _, _ := testEnv("")
	root := newRootCmd(e)
	flags := map[string]map[string]*pflag.Flag{} // command → flag name → flag
	for _, name := range []string{"serve", "work"} {
		c, _, err := root.Find([]string{name})
		if err != nil || c.Name() != name {
			t.Fatalf("no %s command: %v", name, err)
		}
		flags[name] = map[string]*pflag.Flag{}
		c.Flags().VisitAll(func(f *pflag.Flag) { flags[name][f.Name] = f })
		c.InheritedFlags().VisitAll(func(f *pflag.Flag) { flags[name][f.Name] = f })
		delete(flags[name], "help")
	}
	var keys []string
	configKeys(reflect.TypeFor[fileConfig](), "", &keys)
	code, text := envNames(t)
	envInUsage := regexp.MustCompile(`env ((?:BACKLOG|OTEL)_[A-Z0-9_]+)`)

	tableFlags := map[string]bool{} // "command --flag"
	tableKeys := map[string]bool{}
	tableEnv := map[string]bool{}
	for _, r := range rows {
		if r.key != "" {
			if tableKeys[r.key] {
				t.Errorf("%s:%d: config key %s listed twice", productionDoc, r.line, r.key)
			}
			tableKeys[r.key] = true
			if !slices.Contains(keys, r.key) {
				t.Errorf("%s:%d: config key %s is not a key of the config file (cli/config.go fileConfig)", productionDoc, r.line, r.key)
			}
		}
		for _, v := range r.env {
			tableEnv[v] = true
			if !regexp.MustCompile(`\b` + v + `\b`).MatchString(text) {
				t.Errorf("%s:%d: variable %s is read nowhere in cli/", productionDoc, r.line, v)
			}
		}
		if len(r.commands) == 0 {
			t.Errorf("%s:%d: no commands named", productionDoc, r.line)
		}
		for _, c := range r.commands {
			if flags[c] == nil {
				t.Errorf("%s:%d: command %q is not serve or work", productionDoc, r.line, c)
				continue
			}
			if r.flag == "" {
				continue
			}
			f := flags[c][r.flag]
			if f == nil {
				t.Errorf("%s:%d: %s has no flag --%s", productionDoc, r.line, c, r.flag)
				continue
			}
			if tableFlags[c+" --"+r.flag] {
				t.Errorf("%s:%d: %s --%s listed twice", productionDoc, r.line, c, r.flag)
			}
			tableFlags[c+" --"+r.flag] = true
			for _, v := range r.env {
				if !strings.Contains(f.Usage, v) {
					t.Errorf("%s:%d: %s --%s: its help does not name %s: %q", productionDoc, r.line, c, r.flag, v, f.Usage)
				}
			}
			for _, m := range envInUsage.FindAllStringSubmatch(f.Usage, -1) {
				if !slices.Contains(r.env, m[1]) {
					t.Errorf("%s:%d: %s --%s reads %s (its help says so); the row does not name it", productionDoc, r.line, c, r.flag, m[1])
				}
			}
		}
	}
	for c, fs := range flags {
		for name := range fs {
			if !tableFlags[c+" --"+name] {
				t.Errorf("%s: the settings table lacks %s --%s", productionDoc, c, name)
			}
		}
	}
	for _, k := range keys {
		if !tableKeys[k] {
			t.Errorf("%s: the settings table lacks the config key %s", productionDoc, k)
		}
	}
	var missing []string
	for v := range code {
		if !tableEnv[v] && notServeWorkEnv[v] == "" {
			missing = append(missing, v)
		}
	}
	sort.Strings(missing)
	for _, v := range missing {
		t.Errorf("%s: the settings table lacks the variable %s, which cli/ reads", productionDoc, v)
	}
}
