package core

import (
	"fmt"
)

func badFilter(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidFilter}, a...)...)
}
