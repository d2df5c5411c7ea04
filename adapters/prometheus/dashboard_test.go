package prometheus_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	bprom "github.com/backlogq/backlog/adapters/prometheus"
	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/internal/teststores"
	prom "github.com/prometheus/client_golang/prometheus"
)

const dashboardPath = "../../docs/grafana/backlog.json"

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	SchemaVersion int `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource *datasourceRef  `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	Targets    []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource *datasourceRef `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a row's panels
}

// exposed registers a Metrics over a real store, emits one event of each
// kind, scrapes it and returns every family name with the label names its
// series carry.
func exposed(t *testing.T) map[string]map[string]bool {
	st := teststores.Memory(t)
	ctx := t.Context()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := st.Insert(ctx, now, []core.InsertParams{{Queue: "q", Kind: "k", Args: []byte(`{}`), Priority: 5, MaxAttempts: 1, RunAt: now}}); err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterWorker(ctx, core.WorkerInfo{ID: "w", Host: "h", Queues: []string{"q"}, StartedAt: now, HeartbeatAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.(contract.QueueHistory).AddQueueHistory(ctx, []contract.QueueSample{{Queue: "q", At: now, Completed: 1, Gauge: true, Depth: 1}}); err != nil {
		t.Fatal(err)
	}
	m := bprom.New(st, bprom.Options{Now: func() time.Time { return now }, Running: func() int { return 0 }})
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	for _, e := range oneOfEach(now) {
		m.Observe(e)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for _, mf := range mfs {
		labels := map[string]bool{}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		name := mf.GetName()
		if mf.GetType().String() == "HISTOGRAM" {
			out[name+"_sum"] = labels
			out[name+"_count"] = labels
			withLe := map[string]bool{"le": true}
			for l := range labels {
				withLe[l] = true
			}
			out[name+"_bucket"] = withLe
			continue // the bare histogram name is no series of its own
		}
		out[name] = labels
	}
	// Every family the package documents is there.
	for name, typ := range families {
		if typ == "histogram" {
			name += "_count"
		}
		if out[name] == nil {
			t.Errorf("the scrape has no family %s", name)
		}
	}
	return out
}

var (
	metricRe   = regexp.MustCompile(`\bbacklog_[a-zA-Z0-9_:]*`)
	selectorRe = regexp.MustCompile(`\b(backlog_[a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcherRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
	groupingRe = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// targetLabels are added by Prometheus to every scraped series.
var targetLabels = []string{"instance", "job"}

// checkExpr reports what in expr does not match the exposed families: a
// metric name that is not exposed, a matcher or grouping on a label that
// the named families do not carry.
func checkExpr(expr string, fams map[string]map[string]bool) []string {
	var problems []string
	names := metricRe.FindAllString(expr, -1)
	if len(names) == 0 {
		problems = append(problems, "names no backlog_ metric")
	}
	labels := map[string]bool{}
	for _, l := range targetLabels {
		labels[l] = true
	}
	for _, n := range names {
		fam, ok := fams[n]
		if !ok {
			problems = append(problems, "unknown metric "+n)
			continue
		}
		for l := range fam {
			labels[l] = true
		}
	}
	for _, sel := range selectorRe.FindAllStringSubmatch(expr, -1) {
		fam := fams[sel[1]]
		for _, m := range matcherRe.FindAllStringSubmatch(sel[2], -1) {
			if !fam[m[1]] && !slices.Contains(targetLabels, m[1]) {
				problems = append(problems, sel[1]+" has no label "+m[1])
			}
		}
	}
	for _, g := range groupingRe.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !labels[l] {
				problems = append(problems, "grouping by "+l+", which no metric of the expression carries")
			}
		}
	}
	return problems
}

func TestDashboardQueriesNameExposedMetrics(t *testing.T) {
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d, want ≥ 36", d.SchemaVersion)
	}
	fams := exposed(t)

	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		switch v.Name {
		case "datasource":
			var q string
			if v.Type != "datasource" || json.Unmarshal(v.Query, &q) != nil || q != "prometheus" {
				t.Errorf("datasource variable: type %q query %s; want a datasource variable of type prometheus", v.Type, v.Query)
			}
		case "queue":
			// The query is a string in older dashboards, an object with
			// a query field in newer ones.
			var q string
			if json.Unmarshal(v.Query, &q) != nil {
				var obj struct {
					Query string `json:"query"`
				}
				if err := json.Unmarshal(v.Query, &obj); err != nil {
					t.Errorf("queue variable query %s: %v", v.Query, err)
				}
				q = obj.Query
			}
			if v.Type != "query" || strings.ReplaceAll(q, " ", "") != "label_values(backlog_jobs,queue)" {
				t.Errorf("queue variable: type %q query %q; want label_values(backlog_jobs, queue)", v.Type, q)
			}
			if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
				t.Errorf("queue variable datasource %+v, want ${datasource}", v.Datasource)
			}
			if p := checkExpr("backlog_jobs{queue=\"\"}", fams); len(p) > 0 {
				t.Errorf("queue variable: %v", p)
			}
		}
	}
	if !vars["datasource"] || !vars["queue"] {
		t.Errorf("template variables %v; want datasource and queue", vars)
	}

	var all []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	ids := map[int]bool{}
	var titles []string
	targets := 0
	for _, p := range all {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		titles = append(titles, strings.ToLower(p.Title))
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no targets", p.Title)
		}
		for _, tg := range p.Targets {
			targets++
			for _, problem := range checkExpr(tg.Expr, fams) {
				t.Errorf("panel %q target %s: %s\n\t%s", p.Title, tg.RefID, problem, tg.Expr)
			}
		}
	}
	if targets == 0 {
		t.Fatal("the dashboard has no targets")
	}
	for _, want := range []string{"jobs by state", "throughput", "failures and discards", "queue wait p50",
		"execution time p95 by kind", "end-to-end p95", "running jobs", "workers by liveness", "rescued jobs", "store errors"} {
		found := false
		for _, title := range titles {
			found = found || strings.Contains(title, want)
		}
		if !found {
			t.Errorf("no panel titled like %q (titles: %q)", want, titles)
		}
	}
}

// TestDashboardCheckCatchesMistakes makes sure the expression check above
// is not vacuous.
func TestDashboardCheckCatchesMistakes(t *testing.T) {
	fams := exposed(t)
	for expr, want := range map[string]string{
		`sum(rate(backlog_jobs_done_total[5m]))`: "unknown metric backlog_jobs_done_total",
		`backlog_workers_removed_total`:          "unknown metric backlog_workers_removed_total",
		`sum by (queue) (backlog_workers)`:       "grouping by queue",
		`backlog_jobs_pruned_total{queue="q"}`:   "has no label queue",
		`backlog_job_queue_wait_seconds`:         "unknown metric backlog_job_queue_wait_seconds",
		`up`:                                     "names no backlog_ metric",
		`histogram_quantile(0.9, sum by (le, kind) (rate(backlog_job_end_to_end_seconds_bucket[5m])))`: "grouping by kind",
	} {
		problems := strings.Join(checkExpr(expr, fams), "; ")
		if !strings.Contains(problems, want) {
			t.Errorf("%s: problems %q, want one containing %q", expr, problems, want)
		}
	}
	good := `histogram_quantile(0.95, sum by (le, kind) (rate(backlog_job_execution_seconds_bucket{queue=~"$queue"}[$__rate_interval])))`
	if p := checkExpr(good, fams); len(p) > 0 {
		t.Errorf("%s: unexpected problems %v", good, p)
	}
}

// TestMetricsDocCoversEveryFamily checks docs/metrics.md: it names every
// exposed family, and its example queries name only exposed metrics and
// labels.
func TestMetricsDocCoversEveryFamily(t *testing.T) {
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for name := range families {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/metrics.md does not describe %s", name)
		}
	}
	fams := exposed(t)
	queries := 0
	rest := doc
	for {
		i := strings.Index(rest, "```promql\n")
		if i < 0 {
			break
		}
		rest = rest[i+len("```promql\n"):]
		j := strings.Index(rest, "```")
		if j < 0 {
			t.Fatal("unterminated promql block")
		}
		// Blank lines separate the queries of one block.
		for _, q := range strings.Split(rest[:j], "\n\n") {
			if q = strings.TrimSpace(q); q != "" {
				queries++
				for _, problem := range checkExpr(q, fams) {
					t.Errorf("docs/metrics.md query: %s\n\t%s", problem, q)
				}
			}
		}
		rest = rest[j+3:]
	}
	if queries < 5 {
		t.Errorf("docs/metrics.md has %d example queries, want at least 5", queries)
	}
}
