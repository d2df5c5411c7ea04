package core_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/backlogq/backlog/core"
)

// DescribeRetry shows the two policies it knows with their defaults filled
// in, and any other as custom.
func TestDescribeRetry(t *testing.T) {
	for _, c := range []struct {
		p    core.RetryPolicy
		want core.RetryDescription
	}{
		{core.ExponentialBackoff{}, core.RetryDescription{Policy: "exponential", BaseSeconds: 1, MaxSeconds: 86400, Jitter: 0.25}},
		{&core.ExponentialBackoff{Base: 2 * time.Second, Max: time.Minute, Jitter: -1}, core.RetryDescription{Policy: "exponential", BaseSeconds: 2, MaxSeconds: 60}},
		{core.DelayList{500 * time.Millisecond, time.Minute}, core.RetryDescription{Policy: "delays", DelaysSeconds: []float64{0.5, 60}}},
		{core.DelayList{}, core.RetryDescription{Policy: "delays", DelaysSeconds: []float64{}}},
		{core.RetryFunc(func(*core.Job, error) time.Duration { return time.Second }), core.RetryDescription{Policy: "custom"}},
		{nil, core.RetryDescription{Policy: "custom"}},
	} {
		if got := core.DescribeRetry(c.p); !reflect.DeepEqual(got, c.want) {
			t.Errorf("DescribeRetry(%#v) = %+v, want %+v", c.p, got, c.want)
		}
	}
}
