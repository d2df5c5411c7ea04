package httpapi

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// WorkerKindsKey is the metadata key of a worker's registry record that
// holds the kinds the worker announced when it registered
// (RegisterRequest.Kinds): core.WorkerKindsKey, which the engine's own
// workers write too. GET /v1/workers shows them as the worker's kinds. A
// registration may not set it in its metadata.
const WorkerKindsKey = core.WorkerKindsKey

// MaxWorkerKinds is the most kinds one registration may announce.
const MaxWorkerKinds = 1000

// MaxWorkerQueues is the most queues one registration may name, and so
// the most one claim may name or claim from: a claim reads the queues one
// after another, so the cap bounds the store time of every claim. A
// registration or claim naming more is refused with 400 invalid-request.
const MaxWorkerQueues = 1000

// validQueues checks the queue names of a registration or claim (field
// names them in the message): at most MaxWorkerQueues, each a valid queue
// name (contract.ValidateQueueName). The message quotes at most the first
// offending name, never the whole list.
func validQueues(field string, qs []string) error {
	if len(qs) > MaxWorkerQueues {
		return newProblem(SlugInvalidRequest, fmt.Sprintf("%s: %d queues, over the limit of %d", field, len(qs), MaxWorkerQueues))
	}
	for _, q := range qs {
		if err := contract.ValidateQueueName(q); err != nil {
			return newProblem(SlugInvalidRequest, field+": "+trimInvalid(err.Error()))
		}
	}
	return nil
}

// validKinds checks the kinds of a registration and returns them sorted,
// without repeats.
func validKinds(kinds []string) ([]string, error) {
	if len(kinds) > MaxWorkerKinds {
		return nil, newProblem(SlugInvalidRequest, fmt.Sprintf("kinds: %d kinds, over the limit of %d", len(kinds), MaxWorkerKinds))
	}
	for _, k := range kinds {
		if k == "" || len(k) > contract.MaxKindLen || !utf8.ValidString(k) {
			return nil, newProblem(SlugInvalidRequest, fmt.Sprintf("kinds: kind %q must be 1..%d bytes of UTF-8", k, contract.MaxKindLen))
		}
	}
	if len(kinds) == 0 {
		return nil, nil
	}
	out := slices.Clone(kinds)
	slices.Sort(out)
	return slices.Compact(out), nil
}
