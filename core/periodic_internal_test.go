package core

import (
	"strings"
	"testing"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

func mustSchedule(t *testing.T, s string) schedule {
	t.Helper()
	sch, err := parseSchedule(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return sch
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestParseSchedule(t *testing.T) {
	for spec, want := range map[string][]string{
		"*/15 * * * *":                   {"2026-03-01T10:15:00Z", "2026-03-01T10:30:00Z"},
		"30 */15 * * * *":                {"2026-03-01T10:15:30Z", "2026-03-01T10:30:30Z"}, // optional seconds
		"@daily":                         {"2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z"},
		"@every 90s":                     {"2026-03-01T10:13:30Z", "2026-03-01T10:15:00Z"}, // from the Unix epoch
		"CRON_TZ=Europe/Paris 0 9 * * *": {"2026-03-02T08:00:00Z", "2026-03-03T08:00:00Z"},
	} {
		sch := mustSchedule(t, spec)
		n1 := sch.next(at("2026-03-01T10:12:34Z"))
		n2 := sch.next(n1)
		if n1.Format(time.RFC3339) != want[0] || n2.Format(time.RFC3339) != want[1] {
			t.Errorf("%q: next %s, %s; want %v", spec, n1, n2, want)
		}
	}
	for spec, want := range map[string]string{
		"":                               "empty",
		"* * *":                          "",
		"61 * * * *":                     "",
		"@every 1500ms":                  "whole seconds",
		"CRON_TZ=Nowhere/City * * * * *": "",
		"0 0 30 2 *":                     "never fires",
	} {
		_, err := parseSchedule(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", spec, err, want)
		}
	}
}

// Daylight saving time in a zone: a time skipped by spring forward runs
// once, just after the gap; a time repeated by fall back runs once. Each
// occurrence is a distinct UTC instant, so its unique key is too.
func TestScheduleDaylightSaving(t *testing.T) {
	sch := mustSchedule(t, "CRON_TZ=Europe/Paris 30 2 * * *")
	// 2026-03-29: 02:00 → 03:00 in Paris; 02:30 runs at 03:30 (01:30Z).
	n := sch.next(at("2026-03-28T12:00:00Z"))
	if n.Format(time.RFC3339) != "2026-03-29T01:30:00Z" {
		t.Errorf("spring forward: %s", n)
	}
	// 2026-10-25: 03:00 → 02:00, 02:30 happens twice (00:30Z and 01:30Z).
	n = sch.next(at("2026-10-24T12:00:00Z"))
	n2 := sch.next(n)
	if n.Format(time.RFC3339) != "2026-10-25T00:30:00Z" || n2.Format(time.RFC3339) != "2026-10-26T01:30:00Z" {
		t.Errorf("fall back: %s then %s", n, n2)
	}
}

func TestOccurrencesMissedPolicies(t *testing.T) {
	hourly := mustSchedule(t, "0 * * * *")
	now := at("2026-03-01T10:00:20Z")
	fmtAll := func(ts []time.Time) string {
		var s []string
		for _, t := range ts {
			s = append(s, t.Format("15:04"))
		}
		return strings.Join(s, ",")
	}
	// Due within the grace: enqueued whatever the policy; the hold is 2 h,
	// so the look-back is 1 h.
	for _, p := range []MissedPolicy{MissedSkip, MissedRunOnce, MissedRunEach} {
		if got := fmtAll(hourly.occurrences(p, now, time.Time{})); got != "10:00" {
			t.Errorf("%s, on time: %s", p, got)
		}
	}
	// 40 minutes after an occurrence: missed.
	later := at("2026-03-01T10:40:00Z")
	for p, want := range map[MissedPolicy]string{MissedSkip: "", MissedRunOnce: "10:00", MissedRunEach: "10:00"} {
		if got := fmtAll(hourly.occurrences(p, later, time.Time{})); got != want {
			t.Errorf("%s, 40 min late: %s, want %s", p, got, want)
		}
	}
	// Every minute, down for ten: the hold is 1 h, the look-back 30 min.
	minutely := mustSchedule(t, "* * * * *")
	now = at("2026-03-01T10:10:30Z")
	since := at("2026-03-01T10:00:30Z")
	for p, want := range map[MissedPolicy]string{
		MissedSkip:    "10:10",
		MissedRunOnce: "10:10",
		MissedRunEach: "10:01,10:02,10:03,10:04,10:05,10:06,10:07,10:08,10:09,10:10",
	} {
		if got := fmtAll(minutely.occurrences(p, now, since)); got != want {
			t.Errorf("%s, resumed 10:00:30: %s, want %s", p, got, want)
		}
	}
	// Without since, each looks back half the hold only.
	if got := minutely.occurrences(MissedRunEach, now, time.Time{}); len(got) != 30 || got[0].Format("15:04") != "09:41" {
		t.Errorf("each without since: %d from %s", len(got), got[0])
	}
	// Missed occurrences and none due: once runs the newest.
	now = at("2026-03-01T10:10:30Z")
	daily := mustSchedule(t, "@daily")
	if got := daily.occurrences(MissedRunOnce, now, time.Time{}); len(got) != 1 || got[0].Format(time.RFC3339) != "2026-03-01T00:00:00Z" {
		t.Errorf("daily, once: %v", got)
	}
}

func TestPeriodicHold(t *testing.T) {
	for period, want := range map[time.Duration]time.Duration{
		time.Second:          time.Hour,
		2 * time.Hour:        4 * time.Hour,
		400 * 24 * time.Hour: contract.MaxUniqueFor,
	} {
		if got := PeriodicHold(period); got != want {
			t.Errorf("PeriodicHold(%s) = %s, want %s", period, got, want)
		}
	}
}
