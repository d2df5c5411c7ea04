package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// record is one run as run.sh writes it: who ran what, the machine's load
// average before and after, and the tool's own JSON result.
type record struct {
	Mode       string          `json:"mode"`   // burndown, steady or latency
	Config     string          `json:"config"` // a label for the settings, e.g. "workers=100"
	System     string          `json:"system"` // backlog or river
	Run        int             `json:"run"`
	LoadBefore string          `json:"load_before"`
	LoadAfter  string          `json:"load_after"`
	Result     json.RawMessage `json:"result"`
}

// value returns the headline figure of a run (jobs completed per second),
// a secondary one (jobs inserted per second) and, for steady and latency
// runs, the p50 and p99 of insert → start (else negative). A latency run
// has no rates (0).
func (r record) value() (completed, inserted float64, p50, p99 time.Duration, err error) {
	switch r.Mode {
	case "burndown":
		var b burnResult
		if err := json.Unmarshal(r.Result, &b); err != nil {
			return 0, 0, 0, 0, err
		}
		return b.JobsPerSec, float64(b.Jobs) / b.Insert.Seconds(), -1, -1, nil
	case "steady", "paced":
		var s steadyResult
		if err := json.Unmarshal(r.Result, &s); err != nil {
			return 0, 0, 0, 0, err
		}
		return s.CompletePerS, s.InsertPerS, s.Latency.P50, s.Latency.P99, nil
	case "latency":
		var l latencyResult
		if err := json.Unmarshal(r.Result, &l); err != nil {
			return 0, 0, 0, 0, err
		}
		return 0, 0, l.P50, l.P99, nil
	}
	return 0, 0, 0, 0, fmt.Errorf("unknown mode %q", r.Mode)
}

func summarize(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: summarize RESULTS.jsonl")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	type key struct{ mode, config, system string }
	type row struct {
		completed, inserted, p50, p99 []float64 // latencies in ms
	}
	var order []key
	rows := map[key]*row{}
	var recs []record
	dec := json.NewDecoder(f)
	for {
		var r record
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		c, i, p50, p99, err := r.value()
		if err != nil {
			return fmt.Errorf("%s %s %s run %d: %w", r.Mode, r.Config, r.System, r.Run, err)
		}
		k := key{r.Mode, r.Config, r.System}
		if rows[k] == nil {
			rows[k] = &row{}
			order = append(order, k)
		}
		rows[k].completed = append(rows[k].completed, c)
		rows[k].inserted = append(rows[k].inserted, i)
		if p50 >= 0 {
			rows[k].p50 = append(rows[k].p50, ms(p50))
			rows[k].p99 = append(rows[k].p99, ms(p99))
		}
		recs = append(recs, r)
	}

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "mode\tconfig\tsystem\tjobs/s per run\tmedian jobs/s\tmedian insert/s\tmedian p50 ms\tmedian p99 ms\t")
	for _, k := range order {
		r := rows[k]
		runs := make([]string, len(r.completed))
		for i, v := range r.completed {
			runs[i] = fmt.Sprintf("%.0f", v)
		}
		lat := func(v []float64) string {
			if len(v) == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f", median(v))
		}
		rate := func(v []float64) string { return fmt.Sprintf("%.0f", median(v)) }
		if k.mode == "latency" { // idle workers: no rates
			runs = []string{"-"}
			rate = func([]float64) string { return "-" }
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", k.mode, k.config, k.system,
			strings.Join(runs, " "), rate(r.completed), rate(r.inserted), lat(r.p50), lat(r.p99))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if lines := summaryLines(recs); len(lines) > 0 {
		fmt.Println()
		fmt.Println("median jobs/s per mode and config, backlog ÷ River:")
		for _, l := range lines {
			fmt.Println("  " + l)
		}
	}
	fmt.Println()
	fmt.Println("per run (load average 1/5/15 min before → after):")
	for _, r := range recs {
		c, _, p50, p99, _ := r.value()
		fig := fmt.Sprintf("%8.0f jobs/s", c)
		if r.Mode == "latency" {
			fig = fmt.Sprintf("%8s       ", "idle")
		}
		if p50 >= 0 {
			fig += fmt.Sprintf("  p50 %.1f ms p99 %.1f ms", ms(p50), ms(p99))
		}
		fmt.Printf("  %-8s %-28s %-7s run %d  %s   load %s → %s\n",
			r.Mode, r.Config, r.System, r.Run, fig, r.LoadBefore, r.LoadAfter)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// summaryLines returns one line per mode and config that both systems ran
// with rates (not latency), in the order of their first runs:
// "steady workers=100 defaults: River 13.9k, backlog 22.7k, ratio 1.63x",
// the medians of the runs' completed jobs/s and backlog's ÷ River's. A
// config only one system ran gets "River -" or "backlog -" and no ratio.
func summaryLines(recs []record) []string {
	type key struct{ mode, config string }
	var order []key
	rates := map[key]map[string][]float64{}
	for _, r := range recs {
		if r.Mode == "latency" {
			continue
		}
		c, _, _, _, err := r.value()
		if err != nil {
			continue
		}
		k := key{r.Mode, r.Config}
		if rates[k] == nil {
			rates[k] = map[string][]float64{}
			order = append(order, k)
		}
		rates[k][r.System] = append(rates[k][r.System], c)
	}
	var lines []string
	for _, k := range order {
		river, backlog := rates[k]["river"], rates[k]["backlog"]
		ratio := "ratio -"
		if len(river) > 0 && len(backlog) > 0 && median(river) > 0 {
			ratio = fmt.Sprintf("ratio %.2fx", median(backlog)/median(river))
		}
		lines = append(lines, fmt.Sprintf("%s %s: River %s, backlog %s, %s", k.mode, k.config, kilo(river), kilo(backlog), ratio))
	}
	return lines
}

// kilo formats the median of v in thousands with one decimal ("13.9k"),
// below 1,000 as is ("950"), and "-" for no runs.
func kilo(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	m := median(v)
	if m < 1000 {
		return fmt.Sprintf("%.0f", m)
	}
	return fmt.Sprintf("%.1fk", m/1000)
}
