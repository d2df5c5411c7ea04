package releasetest

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	yaml "github.com/oasdiff/yaml3"
)

// deployDir is examples/deploy.
func deployDir(t *testing.T) string { return filepath.Join(repoRoot(t), "examples", "deploy") }

// cliSources is the text of package cli's non-test Go files, where every
// BACKLOG_ environment variable the command reads is named.
func cliSources(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "cli", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(src)
	}
	return b.String()
}

// checkEnvNames fails the test for every BACKLOG_ variable in text that the
// command does not read.
func checkEnvNames(t *testing.T, file, text string) {
	t.Helper()
	src := cliSources(t)
	for _, name := range regexp.MustCompile(`BACKLOG_[A-Z_]+`).FindAllString(text, -1) {
		if !strings.Contains(src, `"`+name+`"`) {
			t.Errorf("%s names %s, which the backlog command does not read", file, name)
		}
	}
}

// systemdAnalyze runs systemd-analyze verify on unit and returns its
// combined output and error.
func systemdAnalyze(t *testing.T, unit string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(testContext(t), "systemd-analyze", "verify", unit)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_PAGER=")
	out, err := cmd.CombinedOutput()
	return string(bytes.TrimSpace(out)), err
}

// TestSystemdUnit checks examples/deploy/backlog.service with systemd-analyze
// verify (its ExecStart pointed at a stand-in executable, which verify
// requires to exist) and that it has the settings a deployment relies on.
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join(deployDir(t), "backlog.service"))
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string][]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			settings[k] = append(settings[k], v)
		}
	}
	for k, want := range map[string]string{
		"Restart":          "on-failure",
		"NoNewPrivileges":  "yes",
		"ProtectSystem":    "strict",
		"DynamicUser":      "yes",
		"User":             "backlog",
		"StateDirectory":   "backlog",
		"EnvironmentFile":  "-/etc/backlog/backlog.env",
		"ExecStart":        "/usr/local/bin/backlog serve",
		"WorkingDirectory": "/var/lib/backlog",
	} {
		if !slices.Contains(settings[k], want) {
			t.Errorf("backlog.service: %s=%v, want %s", k, settings[k], want)
		}
	}
	if !slices.Contains(settings["Environment"], "BACKLOG_DB=sqlite:/var/lib/backlog/backlog.db") {
		t.Errorf("backlog.service: the SQLite file is not in the StateDirectory: Environment=%v", settings["Environment"])
	}
	env, err := os.ReadFile(filepath.Join(deployDir(t), "backlog.env"))
	if err != nil {
		t.Fatal(err)
	}
	checkEnvNames(t, "backlog.service", string(unit))
	checkEnvNames(t, "backlog.env", string(env))

	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed: the unit was not verified")
	}
	dir := t.TempDir()
	stub := filepath.Join(dir, "backlog")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A unit known to be valid first, with the same dependencies: if verify
	// fails on it, verify cannot run here (no systemd, a sandbox without the
	// system's units), which says nothing of ours.
	probe := filepath.Join(dir, "backlog-probe.service")
	probeUnit := "[Unit]\nAfter=network-online.target\nWants=network-online.target\n" +
		"[Service]\nType=oneshot\nExecStart=" + stub + "\n[Install]\nWantedBy=multi-user.target\n"
	if err := os.WriteFile(probe, []byte(probeUnit), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := systemdAnalyze(t, probe); err != nil || out != "" {
		t.Skipf("systemd-analyze verify cannot run here (it fails on a minimal valid unit: %v): %s", err, out)
	}
	checked := filepath.Join(dir, "backlog.service")
	text := strings.ReplaceAll(string(unit), "ExecStart=/usr/local/bin/backlog ", "ExecStart="+stub+" ")
	if err := os.WriteFile(checked, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// verify exits 0 on unknown keys and bad values, which it only prints:
	// any output is a finding.
	if out, err := systemdAnalyze(t, checked); err != nil || out != "" {
		t.Errorf("systemd-analyze verify backlog.service: %v\n%s", err, out)
	}
}

// composeFile is the part of a compose file the test reads.
type composeFile struct {
	Services map[string]struct {
		Image string `yaml:"image"`
		Build *struct {
			Context string `yaml:"context"`
		} `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Ports       []string          `yaml:"ports"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// interpolation is compose's ${NAME}, ${NAME:-default} and ${NAME:?error}.
var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// readYAML decodes the YAML file at path into v, with compose's variables
// given their defaults ("set" for a required one, "" for others).
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = interpolation.ReplaceAllFunc(b, func(m []byte) []byte {
		sub := interpolation.FindSubmatch(m)
		switch {
		case strings.HasSuffix(string(sub[2]), "-"):
			return sub[3]
		case strings.HasSuffix(string(sub[2]), "?"):
			return []byte("set")
		}
		return nil
	})
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestCompose checks examples/deploy/compose.yaml without running it: every
// file it mounts exists, backlog serve runs on the PostgreSQL service and
// listens where Prometheus scrapes it, and Grafana's provisioning points at
// the directory where the shipped board (docs/grafana/backlog.json) is
// mounted, with Prometheus as its data source.
func TestCompose(t *testing.T) {
	dir := deployDir(t)
	var c composeFile
	readYAML(t, filepath.Join(dir, "compose.yaml"), &c)
	for _, s := range []string{"postgres", "backlog", "prometheus", "grafana"} {
		if _, ok := c.Services[s]; !ok {
			t.Fatalf("compose.yaml has no service %q (it has %v)", s, c.Services)
		}
	}

	// mounts maps each service's container paths to the host paths bound
	// there (absolute), for bind mounts; named volumes must be declared.
	mounts := map[string]map[string]string{}
	for name, s := range c.Services {
		mounts[name] = map[string]string{}
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Errorf("service %s: volume %q is not SOURCE:TARGET[:MODE]", name, v)
				continue
			}
			src, dst := parts[0], parts[1]
			if !strings.HasPrefix(src, ".") && !strings.HasPrefix(src, "/") {
				if _, ok := c.Volumes[src]; !ok {
					t.Errorf("service %s mounts the volume %q, which compose.yaml does not declare", name, src)
				}
				continue
			}
			host := filepath.Join(dir, src)
			if _, err := os.Stat(host); err != nil {
				t.Errorf("service %s mounts %s, which does not exist: %v", name, src, err)
			}
			mounts[name][dst] = host
		}
	}

	// backlog: built from the repository's Dockerfile, serving PostgreSQL.
	b := c.Services["backlog"]
	if b.Build == nil {
		t.Error("service backlog has no build")
	} else if _, err := os.Stat(filepath.Join(dir, b.Build.Context, "Dockerfile")); err != nil {
		t.Errorf("service backlog builds %s, which has no Dockerfile: %v", b.Build.Context, err)
	}
	flags := map[string]string{}
	if len(b.Command) == 0 || b.Command[0] != "serve" {
		t.Fatalf("service backlog's command %q is not serve", b.Command)
	}
	for i := 1; i+1 < len(b.Command); i += 2 {
		flags[b.Command[i]] = b.Command[i+1]
	}
	db, err := url.Parse(flags["--db"])
	if err != nil || db.Scheme != "postgres" || db.Hostname() != "postgres" {
		t.Errorf("service backlog: --db %q is not the postgres service (%v)", flags["--db"], err)
	}
	_, port, _ := strings.Cut(flags["--listen"], ":")
	if port == "" {
		t.Errorf("service backlog: --listen %q has no port", flags["--listen"])
	}
	if _, ok := b.Environment["BACKLOG_ADMIN_TOKEN"]; !ok {
		t.Error("service backlog listens beyond loopback and has no BACKLOG_ADMIN_TOKEN")
	}
	checkEnvNames(t, "compose.yaml", strings.Join(slices.Sorted(func(yield func(string) bool) {
		for k := range b.Environment {
			if !yield(k) {
				return
			}
		}
	}), " "))

	// Prometheus scrapes backlog's /metrics.
	promFile, ok := mounts["prometheus"]["/etc/prometheus/prometheus.yml"]
	if !ok {
		t.Fatal("service prometheus does not mount /etc/prometheus/prometheus.yml")
	}
	var prom struct {
		ScrapeConfigs []struct {
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, promFile, &prom)
	scraped := false
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			if sc.MetricsPath == "/metrics" && slices.Contains(st.Targets, "backlog:"+port) {
				scraped = true
			}
		}
	}
	if !scraped {
		t.Errorf("prometheus.yml does not scrape backlog:%s/metrics: %+v", port, prom)
	}

	// Grafana: provisioning mounted where Grafana reads it, Prometheus as the
	// default data source, and the board's directory where the provider looks.
	prov, ok := mounts["grafana"]["/etc/grafana/provisioning"]
	if !ok {
		t.Fatal("service grafana does not mount /etc/grafana/provisioning")
	}
	var ds struct {
		Datasources []struct {
			Type      string `yaml:"type"`
			URL       string `yaml:"url"`
			IsDefault bool   `yaml:"isDefault"`
		} `yaml:"datasources"`
	}
	readYAML(t, filepath.Join(prov, "datasources", "prometheus.yaml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" ||
		ds.Datasources[0].URL != "http://prometheus:9090" || !ds.Datasources[0].IsDefault {
		t.Errorf("the Grafana data source is not the default one on http://prometheus:9090: %+v", ds)
	}
	var dash struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, filepath.Join(prov, "dashboards", "backlog.yaml"), &dash)
	if len(dash.Providers) != 1 || dash.Providers[0].Type != "file" {
		t.Fatalf("the Grafana dashboard provisioning has no file provider: %+v", dash)
	}
	boards, ok := mounts["grafana"][dash.Providers[0].Options.Path]
	if !ok {
		t.Fatalf("the Grafana provider reads %s, which service grafana does not mount", dash.Providers[0].Options.Path)
	}
	if want := filepath.Join(repoRoot(t), "docs", "grafana"); boards != want {
		t.Errorf("service grafana mounts %s at the provider's path, want %s", boards, want)
	}
	board, err := os.ReadFile(filepath.Join(boards, "backlog.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		UID   string `json:"uid"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal(board, &meta); err != nil || meta.UID == "" {
		t.Errorf("docs/grafana/backlog.json is not a Grafana board (uid %q): %v", meta.UID, err)
	}
}
