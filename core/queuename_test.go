package core_test

import (
	"errors"
	"testing"

	"github.com/backlogq/backlog/core"
	"github.com/backlogq/backlog/core/contract"
)

// TestValidateQueueNameRefusesDotSegments: "." and ".." are path
// segments, which URLs clean away, so a queue so named could not be
// paused, resumed or limited by name; they are refused, while names merely
// holding dots are fine.
func TestValidateQueueNameRefusesDotSegments(t *testing.T) {
	for _, name := range []string{".", ".."} {
		if err := contract.ValidateQueueName(name); err == nil || !errors.Is(err, core.ErrInvalidJob) {
			t.Errorf("ValidateQueueName(%q) = %v; want an error wrapping ErrInvalidJob", name, err)
		}
	}
	for _, name := range []string{"...", ".a", "a.", "a..b", "default"} {
		if err := contract.ValidateQueueName(name); err != nil {
			t.Errorf("ValidateQueueName(%q) = %v; want nil", name, err)
		}
	}
}
