package core

import (
	"github.com/backlogq/backlog/core/contract"
)

// checkFingerprint refuses a UniqueFingerprint longer than
// MaxUniqueFingerprintLen or with bytes other than printable ASCII.
func checkFingerprint(p *InsertParams) error {
	if len(p.UniqueFingerprint) > contract.MaxUniqueFingerprintLen {
		return invalid("kind %q: unique fingerprint is %d bytes, over the limit of %d", p.Kind, len(p.UniqueFingerprint), contract.MaxUniqueFingerprintLen)
	}
	for i := 0; i < len(p.UniqueFingerprint); i++ {
		if c := p.UniqueFingerprint[i]; c < 0x20 || c > 0x7e {
			return invalid("kind %q: unique fingerprint holds a byte that is not printable ASCII", p.Kind)
		}
	}
	return nil
}
