package storekit

import "github.com/backlogq/backlog/core/contract"

// JobWeight is what a job weighs against a page's byte budget: the bytes
// of its args and result, the parts that can be large.
func JobWeight(j *contract.Job) int { return len(j.Args) + len(j.Result) }

// CutPage returns the prefix of jobs (in order) that ListPage returns for
// maxBytes: up to and including the first job at which their JobWeight
// summed reaches maxBytes; all of jobs when maxBytes <= 0 or the sum
// stays below it.
func CutPage(jobs []*contract.Job, maxBytes int) []*contract.Job {
	if maxBytes <= 0 {
		return jobs
	}
	size := 0
	for i, j := range jobs {
		if size += JobWeight(j); size >= maxBytes {
			return jobs[:i+1]
		}
	}
	return jobs
}
