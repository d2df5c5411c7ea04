package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/backlogq/backlog/core/contract"
)

// diffJob lists every field in which got differs from want, comparing the
// way the contract allows: args as JSON values, nil and empty collections as
// equal, times as instants that must come back in UTC.
func diffJob(got, want *contract.Job) []string {
	var d []string
	add := func(field string, g, w any) {
		d = append(d, fmt.Sprintf("%s: got %v, want %v", field, g, w))
	}
	if got.ID != want.ID {
		add("ID", got.ID, want.ID)
	}
	if got.Queue != want.Queue {
		add("Queue", fmt.Sprintf("%q", got.Queue), fmt.Sprintf("%q", want.Queue))
	}
	if got.Kind != want.Kind {
		add("Kind", fmt.Sprintf("%q", got.Kind), fmt.Sprintf("%q", want.Kind))
	}
	if msg := diffJSON(got.Args, want.Args); msg != "" {
		d = append(d, "Args: "+msg)
	}
	if got.Priority != want.Priority {
		add("Priority", got.Priority, want.Priority)
	}
	if got.State != want.State {
		add("State", got.State, want.State)
	}
	if got.Attempt != want.Attempt {
		add("Attempt", got.Attempt, want.Attempt)
	}
	if got.MaxAttempts != want.MaxAttempts {
		add("MaxAttempts", got.MaxAttempts, want.MaxAttempts)
	}
	d = append(d, diffTime("RunAt", got.RunAt, want.RunAt)...)
	d = append(d, diffTime("Deadline", got.Deadline, want.Deadline)...)
	if got.UniqueKey != want.UniqueKey {
		add("UniqueKey", fmt.Sprintf("%q", got.UniqueKey), fmt.Sprintf("%q", want.UniqueKey))
	}
	if got.PartitionKey != want.PartitionKey {
		add("PartitionKey", fmt.Sprintf("%q", got.PartitionKey), fmt.Sprintf("%q", want.PartitionKey))
	}
	if !(len(got.Tags) == 0 && len(want.Tags) == 0) && !slices.Equal(got.Tags, want.Tags) {
		add("Tags", fmt.Sprintf("%q", got.Tags), fmt.Sprintf("%q", want.Tags))
	}
	if !(len(got.Metadata) == 0 && len(want.Metadata) == 0) && !maps.Equal(got.Metadata, want.Metadata) {
		add("Metadata", fmt.Sprintf("%q", got.Metadata), fmt.Sprintf("%q", want.Metadata))
	}
	d = append(d, diffErrors(got.Errors, want.Errors)...)
	if !bytes.Equal(got.Result, want.Result) {
		add("Result", fmt.Sprintf("%q", got.Result), fmt.Sprintf("%q", want.Result))
	}
	d = append(d, diffTime("CreatedAt", got.CreatedAt, want.CreatedAt)...)
	d = append(d, diffTime("AttemptedAt", got.AttemptedAt, want.AttemptedAt)...)
	d = append(d, diffTime("FinishedAt", got.FinishedAt, want.FinishedAt)...)
	if got.WorkerID != want.WorkerID {
		add("WorkerID", fmt.Sprintf("%q", got.WorkerID), fmt.Sprintf("%q", want.WorkerID))
	}
	d = append(d, diffTime("LeaseUntil", got.LeaseUntil, want.LeaseUntil)...)
	d = append(d, diffProgress(got.Progress, want.Progress)...)
	switch {
	case got.Checkpoint == nil && want.Checkpoint == nil:
	case got.Checkpoint == nil || want.Checkpoint == nil:
		add("Checkpoint", fmt.Sprintf("%q", got.Checkpoint), fmt.Sprintf("%q", want.Checkpoint))
	default:
		if msg := diffJSON(got.Checkpoint, want.Checkpoint); msg != "" {
			d = append(d, "Checkpoint: "+msg)
		}
	}
	return d
}

// diffProgress compares two progress records (nil: none).
func diffProgress(got, want *contract.Progress) []string {
	switch {
	case got == nil && want == nil:
		return nil
	case got == nil || want == nil:
		return []string{fmt.Sprintf("Progress: got %+v, want %+v", got, want)}
	}
	var d []string
	if got.Percent != want.Percent {
		d = append(d, fmt.Sprintf("Progress.Percent: got %v, want %v", got.Percent, want.Percent))
	}
	if got.Message != want.Message {
		d = append(d, fmt.Sprintf("Progress.Message: got %q, want %q", got.Message, want.Message))
	}
	return append(d, diffTime("Progress.At", got.At, want.At)...)
}

// diffErrors compares two error histories entry by entry.
func diffErrors(got, want []contract.AttemptError) []string {
	if len(got) != len(want) {
		return []string{fmt.Sprintf("Errors: got %d entries %+v, want %d entries %+v", len(got), got, len(want), want)}
	}
	var d []string
	for i := range got {
		g, w := got[i], want[i]
		if g.Attempt != w.Attempt {
			d = append(d, fmt.Sprintf("Errors[%d].Attempt: got %d, want %d", i, g.Attempt, w.Attempt))
		}
		d = append(d, diffTime(fmt.Sprintf("Errors[%d].At", i), g.At, w.At)...)
		if g.Error != w.Error {
			d = append(d, fmt.Sprintf("Errors[%d].Error: got %q, want %q", i, g.Error, w.Error))
		}
		if g.Trace != w.Trace {
			d = append(d, fmt.Sprintf("Errors[%d].Trace: got %q, want %q", i, g.Trace, w.Trace))
		}
		d = append(d, diffTime(fmt.Sprintf("Errors[%d].StartedAt", i), g.StartedAt, w.StartedAt)...)
		if g.DiscardReason != w.DiscardReason {
			d = append(d, fmt.Sprintf("Errors[%d].DiscardReason: got %q, want %q", i, g.DiscardReason, w.DiscardReason))
		}
	}
	return d
}

// diffTime compares a returned time with the expected instant. A set time
// must be the same instant and be in UTC; an unset one must be zero.
func diffTime(field string, got, want time.Time) []string {
	switch {
	case want.IsZero() && !got.IsZero():
		return []string{fmt.Sprintf("%s: got %s, want zero (not set)", field, ts(got))}
	case want.IsZero():
		return nil
	case got.IsZero():
		return []string{fmt.Sprintf("%s: got zero (not set), want %s", field, ts(want))}
	case !got.Equal(want):
		return []string{fmt.Sprintf("%s: got %s, want %s (the same instant at microsecond precision)", field, ts(got), ts(want))}
	case got.Location() != time.UTC:
		return []string{fmt.Sprintf("%s: got %s in location %q; stores must return times in UTC (contract.UTC)", field, ts(got), got.Location())}
	}
	return nil
}

// diffJSON compares two JSON documents by value and returns "" when they
// are equal.
func diffJSON(got, want []byte) string {
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		return fmt.Sprintf("got %q, which is not valid JSON: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		return fmt.Sprintf("suite bug: want %q is not JSON: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		return fmt.Sprintf("got %s, want %s (compared as JSON values)", got, want)
	}
	return ""
}
