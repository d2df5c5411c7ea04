package contract

import (
	"strconv"
)

// MaxSealedTextBytes is the longest sealed error or trace text that
// AttemptError.Bounded keeps: the sealed form of a text already cut to
// MaxErrorBytes/2 bytes with its cut mark, under the longest key id.
// Sealed text cannot be cut without destroying it, so longer sealed text
// is replaced by a note saying so.
const MaxSealedTextBytes = len(textPrefix) + MaxKeyIDLen + 1 + (MaxErrorBytes/2+len(truncatedMark)+gcmOverhead+2)/3*4

const (
	gcmOverhead   = 12 + 16 // nonce and tag
	truncatedMark = "…[truncated]"
)

// boundSealedText keeps sealed text within MaxSealedTextBytes.
func boundSealedText(s string) string {
	if len(s) <= MaxSealedTextBytes {
		return s
	}
	return "[sealed text of " + strconv.Itoa(len(s)) + " bytes dropped: over the limit of " + strconv.Itoa(MaxSealedTextBytes) + "]"
}
