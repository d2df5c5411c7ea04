package mysql

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// errWsrepNotReady is the error number (ER_UNKNOWN_COM_ERROR) a Galera node
// answers with, "WSREP has not yet prepared node for application use",
// while it is not part of the cluster's primary component: joining,
// rejoining, or cut off from the others. The statement took no effect.
const errWsrepNotReady = 1047

// wsrepNotReady reports error 1047 from a Galera node (the number alone
// also means an unknown protocol command, which is no transient error).
func wsrepNotReady(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errWsrepNotReady && strings.Contains(me.Message, "WSREP")
}

// touchQueueSQL writes the queue's record in a claim of a queue with
// limits on a Galera node (claimLimited), so that two such claims on two
// nodes cannot both commit. The claim's lock of the record (SELECT … FOR
// UPDATE) is the node's own: Galera certifies only what a transaction
// writes, and claims that write different jobs would otherwise commit
// together, each having counted the running jobs without the other's.
// With the record written by both, the second to commit fails
// certification (or is aborted by the first's replicated write while it
// holds the lock), gets error 1213 and is retried, counting again. The
// update must change the row (an unchanged row is no write): updated_at
// takes the claim's time, or one microsecond more when it already holds
// it.
//
// Arguments: now, now, queue.
const touchQueueSQL = `
UPDATE {queues}
SET updated_at = IF(updated_at = ?, updated_at + INTERVAL 1 MICROSECOND, ?)
WHERE name = ?`

// Galera reports whether the server Open or New first connected to is a
// node of a Galera cluster (MariaDB Galera, Percona XtraDB Cluster): its
// global wsrep_on variable is ON. On such a node the store writes the
// queue's record in every claim of a queue with limits, so that the limits
// hold across the cluster (see claimLimited and docs/mysql.md).
func (s *Store) Galera() bool { return s.server.galera }

// Topology describes the server for logs, e.g. "MariaDB 10.11.19" or
// "MariaDB 10.11.19, Galera node (cluster of 3 at open)"; the size is the
// wsrep_cluster_size Open or New read.
func (s *Store) Topology() string {
	if !s.server.galera {
		return s.server.String()
	}
	return fmt.Sprintf("%s, Galera node (cluster of %d at open)", s.server, s.server.clusterSize)
}
