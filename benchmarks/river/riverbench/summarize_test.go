package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

func rec(mode, config, system string, run int, jobsPerSec float64) record {
	res := fmt.Sprintf(`{"jobs":1000,"insert_ns":1000000,"burndown_ns":1000000,"jobs_per_sec":%g}`, jobsPerSec)
	if mode == "steady" {
		res = fmt.Sprintf(`{"jobs_per_sec":%g,"insert_per_sec":1,"latency":{"p50_ns":1000000,"p99_ns":2000000}}`, jobsPerSec)
	}
	if mode == "latency" {
		res = `{"jobs":10,"p50_ns":1000000,"p99_ns":2000000}`
	}
	return record{Mode: mode, Config: config, System: system, Run: run, Result: json.RawMessage(res)}
}

// One summary line per mode and config, medians of the runs, backlog ÷
// River; configs one system lacks get no ratio; latency runs none.
func TestSummaryLines(t *testing.T) {
	recs := []record{
		rec("burndown", "workers=100 tuned", "river", 1, 10000),
		rec("burndown", "workers=100 tuned", "backlog", 1, 20000),
		rec("burndown", "workers=100 tuned", "river", 2, 12000),
		rec("burndown", "workers=100 tuned", "backlog", 2, 16000),
		rec("burndown", "workers=100 tuned", "river", 3, 14000),
		rec("burndown", "workers=100 tuned", "backlog", 3, 18000),
		rec("steady", "workers=100 defaults", "river", 1, 13900),
		rec("steady", "workers=100 defaults", "backlog", 1, 22700),
		rec("steady", "workers=1000 only", "backlog", 1, 950),
		rec("latency", "idle", "river", 1, 0),
		rec("latency", "idle", "backlog", 1, 0),
	}
	got := summaryLines(recs)
	want := []string{
		"burndown workers=100 tuned: River 12.0k, backlog 18.0k, ratio 1.50x",
		"steady workers=100 defaults: River 13.9k, backlog 22.7k, ratio 1.63x",
		"steady workers=1000 only: River -, backlog 950, ratio -",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("summary lines\n%q\nwant\n%q", got, want)
	}
}
