package sqlq

import (
	"context"
	"errors"
	"fmt"

	"github.com/backlogq/backlog/core"
)

// errNoSettingsTable is returned by the settings methods of a Store whose
// Tables name no settings table.
var errNoSettingsTable = fmt.Errorf("sqlq: no settings table configured: %w", core.ErrUnsupported)

// GetOrCreateSetting implements core.Settings: an insert that does nothing
// when the key exists (the primary key decides between racing callers,
// in this process or another), then a read of whatever is stored. A value
// is never updated or deleted by the store, so the read after the insert
// always sees the winner's value.
func (s *Store) GetOrCreateSetting(ctx context.Context, key string, value []byte) ([]byte, bool, error) {
	if err := core.CheckSetting(key, value); err != nil {
		return nil, false, err
	}
	if s.t.Settings == "" {
		return nil, false, errNoSettingsTable
	}
	if value == nil {
		value = []byte{}
	}
	created := false
	err := s.tx(ctx, func(c Conn) error {
		verb, suffix := s.d.InsertIgnore()
		b := newBuilder(s.d, 2)
		b.w(verb, " ", s.t.Settings, " (name, value) VALUES (", b.arg(key), ", ", b.argT(value, TypeBytes), ")", suffix)
		res, err := c.Exec(ctx, b.String(), b.args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		created = n > 0
		return err
	})
	if err != nil {
		return nil, false, err
	}
	v, err := s.Setting(ctx, key)
	if errors.Is(err, core.ErrNotFound) {
		// Nothing deletes settings; a missing row here is a broken table.
		return nil, false, fmt.Errorf("sqlq: setting %q vanished after its insert: %w", key, err)
	}
	return v, created, err
}

// Setting implements core.Settings: the value stored under key, or an
// error wrapping core.ErrNotFound.
func (s *Store) Setting(ctx context.Context, key string) ([]byte, error) {
	if s.t.Settings == "" {
		return nil, errNoSettingsTable
	}
	var (
		v     []byte
		found bool
	)
	err := s.retry(ctx, func() error {
		found = false
		b := newBuilder(s.d, 1)
		b.w("SELECT value FROM ", s.t.Settings, " WHERE name = ", b.arg(key))
		rows, err := s.db.Query(ctx, b.String(), b.args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		if rows.Next() {
			if err := rows.Scan(bytesDest{&v}); err != nil {
				return err
			}
			found = true
		}
		return rows.Err()
	})
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, fmt.Errorf("setting %q: %w", key, core.ErrNotFound)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}
