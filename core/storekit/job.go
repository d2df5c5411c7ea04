package storekit

import (
	"fmt"

	"github.com/backlogq/backlog/core/contract"
)

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{contract.ErrInvalidJob}, a...)...)
}
