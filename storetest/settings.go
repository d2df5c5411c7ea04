package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/backlogq/backlog/core/contract"
)

var settingsTests = []test{
	{"settings/round-trip", testSettingsRoundTrip},
	{"settings/get-or-create-is-atomic", testSettingsAtomic},
	{"settings/bounds-are-checked", testSettingsBounds},
	{"settings/put-replaces-and-delete-removes", testSettingsPutDelete},
	{"settings/concurrent-puts-leave-one-value", testSettingsPutRace},
}

// mutable returns the store's contract.MutableSettings, skipping when it has
// none.
func (e *env) mutable(s contract.Store) contract.MutableSettings {
	e.Helper()
	st, ok := s.(contract.MutableSettings)
	if !ok {
		e.Skip("the store does not implement contract.MutableSettings")
	}
	return st
}

func testSettingsPutDelete(e *env) {
	st := e.mutable(e.s)
	for i, v := range [][]byte{[]byte("first"), []byte("second, longer than the first"), {}, {0x00, 0xff}, []byte("second, longer than the first")} {
		if err := st.PutSetting(e.ctx, "mutable", v); err != nil {
			e.Fatalf("PutSetting #%d: unexpected error: %v", i, err)
		}
		got, err := st.Setting(e.ctx, "mutable")
		if err != nil || !bytes.Equal(got, v) {
			e.Fatalf("Setting after PutSetting #%d of %q returned %q, %v; want the value put", i, v, got, err)
		}
	}
	if err := st.PutSetting(e.ctx, "mutable", []byte("same")); err != nil {
		e.Fatal(err)
	}
	if err := st.PutSetting(e.ctx, "mutable", []byte("same")); err != nil {
		e.Fatalf("PutSetting of the value already stored: unexpected error: %v", err)
	}
	if err := st.DeleteSetting(e.ctx, "mutable"); err != nil {
		e.Fatalf("DeleteSetting: unexpected error: %v", err)
	}
	if _, err := st.Setting(e.ctx, "mutable"); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("Setting after DeleteSetting returned %v; want an error wrapping core.ErrNotFound", err)
	}
	if err := st.DeleteSetting(e.ctx, "mutable"); err != nil {
		e.Fatalf("DeleteSetting of a missing key: %v; want nil", err)
	}
	if err := st.PutSetting(e.ctx, "", []byte("x")); err == nil {
		e.Fatal("PutSetting of an empty key: no error; want the bound named")
	}
	if err := st.PutSetting(e.ctx, "big", make([]byte, contract.MaxSettingValueBytes+1)); err == nil {
		e.Fatal("PutSetting of a value over MaxSettingValueBytes: no error")
	}
}

func testSettingsPutRace(e *env) {
	handles := []contract.MutableSettings{e.mutable(e.s)}
	if e.f.Reopen != nil {
		handles = append(handles, e.mutable(e.f.Reopen(e.T, e.s)))
	}
	const rounds, callers = 10, 8
	for r := range rounds {
		key := fmt.Sprintf("put-race-%d", r)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				errs[i] = handles[i%len(handles)].PutSetting(e.ctx, key, fmt.Appendf(nil, "value of caller %d", i))
			}()
		}
		close(gate)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				e.Fatalf("round %d: PutSetting of caller %d on a new key raced by %d others: %v; want no error", r, i, callers-1, err)
			}
		}
		got, err := handles[0].Setting(e.ctx, key)
		if err != nil {
			e.Fatal(err)
		}
		ok := false
		for i := range callers {
			ok = ok || bytes.Equal(got, fmt.Appendf(nil, "value of caller %d", i))
		}
		if !ok {
			e.Fatalf("round %d: after concurrent PutSetting calls the key holds %q; want one caller's value, whole", r, got)
		}
	}
}

// settings returns the store's contract.Settings, skipping when it has none.
func (e *env) settings(s contract.Store) contract.Settings {
	e.Helper()
	st, ok := s.(contract.Settings)
	if !ok {
		e.Skip("the store does not implement contract.Settings")
	}
	return st
}

func testSettingsRoundTrip(e *env) {
	st := e.settings(e.s)
	if _, err := st.Setting(e.ctx, "missing"); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("Setting of a key never stored returned %v; want an error wrapping core.ErrNotFound", err)
	}
	binary := []byte{0x00, 0xff, 0x80, '\n', 'o', 'k', 0x00}
	big := bytes.Repeat([]byte{0xfe, 0x01}, contract.MaxSettingValueBytes/2)
	for _, c := range []struct {
		key   string
		value []byte
	}{
		{"secret", binary},
		{"Secret", []byte("another key: keys compare byte for byte")},
		{"ключ/ü", []byte("unicode key")},
		{"empty", []byte{}},
		{"largest", big},
		{strings.Repeat("k", contract.MaxSettingKeyBytes), []byte("longest key")},
	} {
		got, created, err := st.GetOrCreateSetting(e.ctx, c.key, c.value)
		if err != nil {
			e.Fatalf("GetOrCreateSetting(%.20q) of a new key: unexpected error: %v", c.key, err)
		}
		if !created || !bytes.Equal(got, c.value) {
			e.Fatalf("GetOrCreateSetting(%.20q) of a new key returned %d bytes, created=%v; want the %d bytes handed in, created=true", c.key, len(got), created, len(c.value))
		}
		again, created, err := st.GetOrCreateSetting(e.ctx, c.key, []byte("a later value"))
		if err != nil {
			e.Fatalf("GetOrCreateSetting(%.20q) of an existing key: unexpected error: %v", c.key, err)
		}
		if created || !bytes.Equal(again, c.value) {
			e.Fatalf("GetOrCreateSetting(%.20q) of an existing key returned %q…, created=%v; want the value stored first, byte for byte, created=false (a stored value is never replaced)", c.key, trunc(again), created)
		}
		read, err := st.Setting(e.ctx, c.key)
		if err != nil || !bytes.Equal(read, c.value) {
			e.Fatalf("Setting(%.20q) returned %q…, %v; want the %d bytes stored, byte for byte", c.key, trunc(read), err, len(c.value))
		}
	}
	if e.f.Reopen != nil {
		other := e.settings(e.f.Reopen(e.T, e.s))
		got, created, err := other.GetOrCreateSetting(e.ctx, "secret", []byte("from the other handle"))
		if err != nil || created || !bytes.Equal(got, binary) {
			e.Fatalf("GetOrCreateSetting through a second handle on the same database returned %q, created=%v, %v; want the value the first handle stored (settings are shared by every process on the store)", got, created, err)
		}
	}
}

func trunc(b []byte) []byte {
	if len(b) > 16 {
		return b[:16]
	}
	return b
}

// testSettingsAtomic races callers, half of them on a second handle when
// Factory.Reopen is set, on fresh keys: each must return the value of
// the one caller that created the key.
func testSettingsAtomic(e *env) {
	handles := []contract.Settings{e.settings(e.s)}
	if e.f.Reopen != nil {
		handles = append(handles, e.settings(e.f.Reopen(e.T, e.s)))
	}
	const rounds, callers = 20, 8
	for r := range rounds {
		key := fmt.Sprintf("race-%d", r)
		type answer struct {
			value   []byte
			created bool
			err     error
		}
		answers := make([]answer, callers)
		var ready, wg sync.WaitGroup
		startGate := make(chan struct{})
		for i := range callers {
			ready.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				<-startGate
				v, c, err := handles[i%len(handles)].GetOrCreateSetting(e.ctx, key, fmt.Appendf(nil, "value of caller %d", i))
				answers[i] = answer{v, c, err}
			}()
		}
		ready.Wait()
		close(startGate)
		wg.Wait()
		creators := 0
		var winner []byte
		for i, a := range answers {
			if a.err != nil {
				e.Fatalf("round %d: GetOrCreateSetting of caller %d: unexpected error: %v", r, i, a.err)
			}
			if a.created {
				creators++
				winner = fmt.Appendf(nil, "value of caller %d", i)
			}
		}
		if creators != 1 {
			e.Fatalf("round %d: %d of %d concurrent GetOrCreateSetting calls on one new key reported created=true; want exactly 1 (enforce it with a primary key, never select-then-insert)", r, creators, callers)
		}
		for i, a := range answers {
			if !bytes.Equal(a.value, winner) {
				e.Fatalf("round %d: caller %d got %q but %q was created; every concurrent caller must return the one stored value", r, i, a.value, winner)
			}
		}
		if v, err := handles[0].Setting(e.ctx, key); err != nil || !bytes.Equal(v, winner) {
			e.Fatalf("round %d: Setting after the race returned %q, %v; want %q", r, v, err, winner)
		}
	}
}

func testSettingsBounds(e *env) {
	st := e.settings(e.s)
	for _, c := range []struct {
		what  string
		key   string
		value []byte
	}{
		{"an empty key", "", []byte("x")},
		{"a key over the limit", strings.Repeat("k", contract.MaxSettingKeyBytes+1), []byte("x")},
		{"a key that is not UTF-8", "bad\xff", []byte("x")},
		{"a value over the limit", "too-big", make([]byte, contract.MaxSettingValueBytes+1)},
	} {
		if _, _, err := st.GetOrCreateSetting(e.ctx, c.key, c.value); err == nil {
			e.Fatalf("GetOrCreateSetting of %s returned no error; want one, and nothing stored", c.what)
		}
	}
	if _, err := st.Setting(e.ctx, "too-big"); !errors.Is(err, contract.ErrNotFound) {
		e.Fatalf("Setting after a refused GetOrCreateSetting returned %v; want core.ErrNotFound (nothing stored)", err)
	}
}
