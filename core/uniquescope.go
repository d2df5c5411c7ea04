package core

import "fmt"

// ParseUniqueScope reads a UniqueScope from its name: "global" (or ""),
// "queue" or "kind", as String writes them. Anything else is an error
// naming the three.
func ParseUniqueScope(s string) (UniqueScope, error) {
	switch s {
	case "", "global":
		return UniqueGlobal, nil
	case "queue":
		return UniqueQueue, nil
	case "kind":
		return UniqueKind, nil
	}
	return 0, fmt.Errorf("unique scope %q is not global, queue or kind", s)
}
