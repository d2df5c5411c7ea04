package mysql

import (
	"strings"

	"github.com/backlogq/backlog/store/internal/sqlq"
)

// queries holds the hot statements (claim, insert, finish, lease
// extension) with the store's table names, built once per store by
// buildQueries. Their text is the constant of the same name ending in SQL,
// written out next to the Go that runs it (claim.go, insert.go, and
// finish.go, which also extends leases).
//
// MySQL has no arrays to bind, so a statement that names a batch of jobs
// carries one placeholder per value: where its text depends on the batch
// size, it holds fmt verbs (%s, or %[1]s and %[2]s) that the caller fills
// with marks (an IN list), whens (the arms of a CASE id … END) or the rows
// of a derived table. Everything else in the text is fixed.
type queries struct {
	claimSkipLocked string // claimSkipLockedSQL
	claimLocked     string // claimLockedSQL; %s: marks
	limitedClaim    string // limitedClaimSQL; %s: marks
	claimCandidates string // claimCandidatesSQL
	claimCAS        string // claimCASSQL; %[1]s: marks, %[2]s: whens
	stamped         string // stampedSQL; %s: marks

	limitedCandidates string // limitedCandidatesSQL; %s: read number, index, rows, full kinds and partitions, priorities and order, lock
	touchQueue        string // touchQueueSQL (galera.go)

	insert          string // insertSQL; %s: insertRowSQL per job
	insertReturning string // insertSQL … RETURNING (MariaDB)
	inserted        string // insertedSQL

	insertDeps          string // insertDepsSQL; %s: insertDepsRowSQL per job
	insertDepsReturning string // insertDepsSQL … RETURNING (MariaDB)
	lockDeps            string // lockDepsSQL; %s: marks
	readDeps            string // readDepsSQL; %s: marks
	readArchivedDeps    string // readArchivedDepsSQL; %s: marks
	insertEdges         string // insertEdgesSQL; %s: rows
	setWorkflow         string // setWorkflowSQL; %s: marks

	finishUpdate      string // finishUpdateSQL; %s: finishRowsSQL rows
	finishDelete      string // finishDeleteSQL (MariaDB); %[1]s: marks, %[2]s: whens
	finishDeletePlain string // finishDeletePlainSQL (MariaDB); %[1]s: marks, %[2]s: whens
	finishLock        string // finishLockSQL (MySQL); %[1]s: marks, %[2]s: whens
	deleteIDs         string // deleteIDsSQL; %s: marks

	extendLeases string // extendLeasesSQL; %[1]s: marks, %[2]s: whens

	depEdges     string // depEdgesSQL; %s: marks
	settleEdges  string // settleEdgesSQL; %s: marks
	dependants   string // dependantsSQL; %s: marks
	settleUpdate string // settleUpdateSQL; %s: settle rows
}

// buildQueries fills the table names t and the job column list into the
// statements: {jobs}, {queues}, {deps} (the dependency edges) and
// {columns} in their text, and {due}, the
// shared part of the two claim reads (claimDueSQL), and {fence}, the
// shared fence of the two finish deletions (finishFenceSQL).
func buildQueries(t sqlq.Tables) queries {
	names := strings.NewReplacer("{jobs}", t.Jobs, "{queues}", t.Queues, "{columns}", sqlq.JobColumns)
	r := strings.NewReplacer(
		"{jobs}", t.Jobs, "{queues}", t.Queues, "{columns}", sqlq.JobColumns, "{deps}", t.Deps, "{archive}", t.Archive,
		"{due}", names.Replace(strings.TrimSpace(claimDueSQL)),
		"{fence}", strings.TrimSpace(finishFenceSQL),
	)
	stmt := func(q string) string { return strings.TrimSpace(r.Replace(q)) }
	insert := stmt(insertSQL)
	return queries{
		claimSkipLocked: stmt(claimSkipLockedSQL),
		claimLocked:     stmt(claimLockedSQL),
		limitedClaim:    stmt(limitedClaimSQL),
		claimCandidates: stmt(claimCandidatesSQL),
		claimCAS:        stmt(claimCASSQL),
		stamped:         stmt(stampedSQL),

		limitedCandidates: stmt(limitedCandidatesSQL),
		touchQueue:        stmt(touchQueueSQL),

		insert:          insert,
		insertReturning: insert + "\nRETURNING id",
		inserted:        stmt(insertedSQL),

		insertDeps:          stmt(insertDepsSQL),
		insertDepsReturning: stmt(insertDepsSQL) + "\nRETURNING id",
		lockDeps:            stmt(lockDepsSQL),
		readDeps:            stmt(readDepsSQL),
		readArchivedDeps:    stmt(readArchivedDepsSQL),
		insertEdges:         stmt(insertEdgesSQL),
		setWorkflow:         stmt(setWorkflowSQL),

		finishUpdate:      stmt(finishUpdateSQL),
		finishDelete:      stmt(finishDeleteSQL),
		finishDeletePlain: stmt(finishDeletePlainSQL),
		finishLock:        stmt(finishLockSQL),
		deleteIDs:         stmt(deleteIDsSQL),

		extendLeases: stmt(extendLeasesSQL),

		depEdges:     stmt(depEdgesSQL),
		settleEdges:  stmt(settleEdgesSQL),
		dependants:   stmt(dependantsSQL),
		settleUpdate: stmt(settleUpdateSQL),
	}
}

// marks returns n comma-separated "?": the items of an IN list.
func marks(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}

// whens returns the n arms "WHEN ? THEN ?" of a CASE id … END, which binds
// a value to each id (its arguments: id, value, id, value, …).
func whens(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("WHEN ? THEN ? ", n-1) + "WHEN ? THEN ?"
}
