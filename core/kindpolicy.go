package core

import (
	"slices"
	"time"
)

// KindPolicy is what a Client applies to the jobs of one kind: the
// attempts a job gets when it is enqueued without its own, the schedule
// of its retries and the bound of one attempt. The HTTP API serves it
// (GET /v1/kinds), `backlog kinds` prints it and the dashboard shows it,
// so that the defaults a kind was given in Go (WithMaxAttempts,
// WithRetries, WithRetry, WithTimeout) or in the job server's config file
// can be read where its jobs are looked at.
type KindPolicy struct {
	Kind string `json:"kind"`
	// Handled is true when a handler of this Client runs the kind, false
	// for a kind declared (Handlers.Declare) and run elsewhere, such as a
	// remote worker's.
	Handled bool `json:"handled"`
	// MaxAttempts is the attempts of a job enqueued without its own
	// (Client.MaxAttempts).
	MaxAttempts int `json:"max_attempts"`
	// Retry describes the kind's retry policy (Client.RetryPolicy).
	Retry RetryDescription `json:"retry"`
	// Timeout bounds one attempt run by this Client (WithTimeout, else
	// Config.DefaultTimeout); 0 = none. Encoded in JSON as
	// timeout_seconds.
	Timeout time.Duration `json:"-"`
	// TimeoutSeconds is Timeout in seconds, for JSON.
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
}

// RetryDescription is a RetryPolicy as data, for display: Policy is
// "exponential" (ExponentialBackoff: Base, Max and Jitter with the zero
// values' defaults filled in), "delays" (DelayList: Delays, the last
// repeated) or "custom" (any other RetryPolicy, which cannot be shown).
// Durations are in seconds in JSON.
type RetryDescription struct {
	Policy string `json:"policy"`
	// BaseSeconds and MaxSeconds are an ExponentialBackoff's wait after
	// the first attempt and its cap, in seconds; Jitter its ± fraction.
	BaseSeconds float64 `json:"base_seconds,omitempty"`
	MaxSeconds  float64 `json:"max_seconds,omitempty"`
	Jitter      float64 `json:"jitter,omitempty"`
	// DelaysSeconds is a DelayList's waits in seconds, in order.
	DelaysSeconds []float64 `json:"delays_seconds,omitempty"`
}

// DescribeRetry returns p as data (see RetryDescription).
func DescribeRetry(p RetryPolicy) RetryDescription {
	switch r := p.(type) {
	case ExponentialBackoff:
		base, maxD, jitter := r.settings()
		return RetryDescription{Policy: "exponential", BaseSeconds: base.Seconds(), MaxSeconds: maxD.Seconds(), Jitter: jitter}
	case *ExponentialBackoff:
		if r != nil {
			return DescribeRetry(*r)
		}
	case DelayList:
		d := RetryDescription{Policy: "delays", DelaysSeconds: make([]float64, len(r))}
		for i, v := range r {
			d.DelaysSeconds[i] = v.Seconds()
		}
		return d
	}
	return RetryDescription{Policy: "custom"}
}

// KindPolicies returns the policy of every kind this Client knows (its
// handlers' and its declared kinds), sorted by kind, and the policy a
// kind it does not know gets (Kind ""): DefaultMaxAttempts and
// Config.Retry.
func (c *Client) KindPolicies() (kinds []KindPolicy, unknown KindPolicy) {
	h := c.cfg.Handlers
	unknown = KindPolicy{MaxAttempts: DefaultMaxAttempts, Retry: DescribeRetry(c.cfg.Retry), Timeout: c.cfg.DefaultTimeout}
	unknown.TimeoutSeconds = unknown.Timeout.Seconds()
	if h == nil {
		return []KindPolicy{}, unknown
	}
	h.mu.RLock()
	names := make([]string, 0, len(h.m))
	for k := range h.m {
		names = append(names, k)
	}
	h.mu.RUnlock()
	slices.Sort(names)
	kinds = make([]KindPolicy, 0, len(names))
	for _, k := range names {
		e := h.lookup(k)
		if e == nil {
			continue
		}
		p := KindPolicy{Kind: k, Handled: e.fn != nil, MaxAttempts: c.MaxAttempts(k), Retry: DescribeRetry(c.RetryPolicy(k)), Timeout: c.cfg.DefaultTimeout}
		if e.timeout > 0 {
			p.Timeout = e.timeout
		}
		p.TimeoutSeconds = p.Timeout.Seconds()
		kinds = append(kinds, p)
	}
	return kinds, unknown
}
