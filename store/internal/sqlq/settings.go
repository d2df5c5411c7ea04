package sqlq

import (
	"context"
	"errors"
	"fmt"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/core/storekit"
)

// errNoSettingsTable is returned by the settings methods of a Store whose
// Tables name no settings table.
var errNoSettingsTable = fmt.Errorf("sqlq: no settings table configured: %w", contract.ErrUnsupported)

// GetOrCreateSetting implements contract.Settings: an insert that does nothing
// when the key exists (the primary key decides between racing callers,
// in this process or another), then a read of whatever is stored. A value
// is never updated or deleted by the store, so the read after the insert
// always sees the winner's value (keys of MutableSettings are kept apart
// by their callers).
func (s *Store) GetOrCreateSetting(ctx context.Context, key string, value []byte) ([]byte, bool, error) {
	if err := storekit.CheckSetting(key, value); err != nil {
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
		n, err := s.insertSetting(ctx, c, key, value)
		created = n > 0
		return err
	})
	if err != nil {
		return nil, false, err
	}
	v, err := s.Setting(ctx, key)
	if errors.Is(err, contract.ErrNotFound) {
		// Get-or-create keys are never deleted (MutableSettings keys are
		// kept apart by their callers); a missing row is a broken table.
		return nil, false, fmt.Errorf("sqlq: setting %q vanished after its insert: %w", key, err)
	}
	return v, created, err
}

// Setting implements contract.Settings: the value stored under key, or an
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
		return nil, fmt.Errorf("setting %q: %w", key, contract.ErrNotFound)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// PutSetting implements contract.MutableSettings: an update, and when no row
// was there an insert that does nothing on conflict, then the update
// again (a concurrent caller inserted first). MySQL counts only changed
// rows in an update, so a zero count may mean "same value": the insert
// then does nothing and the second update is harmless.
func (s *Store) PutSetting(ctx context.Context, key string, value []byte) error {
	if err := storekit.CheckSetting(key, value); err != nil {
		return err
	}
	if s.t.Settings == "" {
		return errNoSettingsTable
	}
	if value == nil {
		value = []byte{}
	}
	return s.tx(ctx, func(c Conn) error {
		update := func() (int64, error) {
			b := newBuilder(s.d, 2)
			b.w("UPDATE ", s.t.Settings, " SET value = ", b.argT(value, TypeBytes), " WHERE name = ", b.arg(key))
			res, err := c.Exec(ctx, b.String(), b.args...)
			if err != nil {
				return 0, err
			}
			return res.RowsAffected()
		}
		n, err := update()
		if err != nil || n > 0 {
			return err
		}
		if n, err = s.insertSetting(ctx, c, key, value); err != nil || n > 0 {
			return err
		}
		_, err = update()
		return err
	})
}

// DeleteSetting implements contract.MutableSettings.
func (s *Store) DeleteSetting(ctx context.Context, key string) error {
	if s.t.Settings == "" {
		return errNoSettingsTable
	}
	return s.tx(ctx, func(c Conn) error {
		b := newBuilder(s.d, 1)
		b.w("DELETE FROM ", s.t.Settings, " WHERE name = ", b.arg(key))
		_, err := c.Exec(ctx, b.String(), b.args...)
		return err
	})
}

// insertSetting inserts key unless it exists (the insert does nothing on
// conflict) and returns the rows inserted: 1, or 0 when the key was there.
func (s *Store) insertSetting(ctx context.Context, c Conn, key string, value []byte) (int64, error) {
	verb, suffix := s.d.InsertIgnore()
	b := newBuilder(s.d, 2)
	b.w(verb, " ", s.t.Settings, " (name, value) VALUES (", b.arg(key), ", ", b.argT(value, TypeBytes), ")", suffix)
	res, err := c.Exec(ctx, b.String(), b.args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
