package sqlq

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// StmtCache keeps prepared statements for the statement texts a store runs
// repeatedly, so the database parses each once per connection (database/sql
// keeps one driver statement per connection under each *sql.Stmt, and
// Tx.StmtContext reuses it). A text is prepared once it has been seen
// Admit times; at most Max texts are kept, least recently used evicted.
// Batch statements whose text depends on the batch size (Finish of 100
// outcomes, say) are cached too once they repeat. The zero value is not
// usable; set DB.
//
// Preparing needs a pool connection of its own; inside a transaction that
// is a second one. So the pool should allow at least two connections, and
// preparation waits at most PrepareWait for one (then the statement runs
// unprepared) so a saturated pool cannot deadlock.
type StmtCache struct {
	DB    *sql.DB
	Max   int // 0 means 128
	Admit int // 0 means 2

	// PrepareWait bounds the wait for a connection to prepare on; 0 means
	// 20ms.
	PrepareWait time.Duration

	mu    sync.Mutex
	tick  uint64
	stmts map[string]*cachedStmt
	seen  map[string]int
}

type cachedStmt struct {
	st   *sql.Stmt
	used uint64
}

// get returns the prepared statement for q, preparing it when q has become
// frequent, or nil to run q unprepared.
func (c *StmtCache) get(ctx context.Context, q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stmts == nil {
		c.stmts = map[string]*cachedStmt{}
		c.seen = map[string]int{}
	}
	c.tick++
	if cs, ok := c.stmts[q]; ok {
		cs.used = c.tick
		return cs.st
	}
	admit := c.Admit
	if admit <= 0 {
		admit = 2
	}
	if len(c.seen) > 4096 {
		clear(c.seen)
	}
	c.seen[q]++
	if c.seen[q] < admit {
		return nil
	}
	wait := c.PrepareWait
	if wait <= 0 {
		wait = 20 * time.Millisecond
	}
	pctx, cancel := context.WithTimeout(ctx, wait)
	st, err := c.DB.PrepareContext(pctx, q)
	cancel()
	if err != nil {
		return nil // run unprepared; the error (if real) surfaces there
	}
	delete(c.seen, q)
	max := c.Max
	if max <= 0 {
		max = 128
	}
	if len(c.stmts) >= max {
		var old string
		var oldUse uint64
		for k, v := range c.stmts {
			if old == "" || v.used < oldUse {
				old, oldUse = k, v.used
			}
		}
		c.stmts[old].st.Close() // database/sql defers the close while a tx uses it
		delete(c.stmts, old)
	}
	c.stmts[q] = &cachedStmt{st: st, used: c.tick}
	return st
}

// Close closes every cached statement.
func (c *StmtCache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.stmts {
		v.st.Close()
		delete(c.stmts, k)
	}
	return nil
}

// cachedConn runs statements of one transaction through a StmtCache.
type cachedConn struct {
	tx    *sql.Tx
	cache *StmtCache
}

func (c cachedConn) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := c.cache.get(ctx, q); st != nil {
		return c.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return c.tx.ExecContext(ctx, q, args...)
}

func (c cachedConn) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	var r *sql.Rows
	var err error
	if st := c.cache.get(ctx, q); st != nil {
		r, err = c.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	} else {
		r, err = c.tx.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}
