package sqlite

import (
	"strings"

	"github.com/backlogq/backlog/store/internal/sqlq"
)

// statements are the store's hot statements (claim, insert, finish, lease
// extension) and those of job dependencies with its table names, built
// once per store by newStatements. Their text is the constant of the same
// name ending in SQL, written out next to the Go that runs it (claim.go,
// insert.go, finish.go, leases.go, deps.go).
//
// A statement that names a batch of jobs carries one placeholder per
// value: where its text depends on the batch size, it holds fmt verbs (%s,
// or %[1]s and %[2]s) that the caller fills with marks (an IN list), whens
// (the arms of a CASE id … END) or rows (a VALUES list). Everything else in
// the text is fixed.
type statements struct {
	claim        string // claimSQL
	limitedCands string // limitedCandidatesSQL
	// limitedCandsPart is limitedCandidatesPartSQL.
	limitedCandsPart string
	limitedClaim     string // limitedClaimSQL; %s: marks

	insert string // insertSQL; %s: rows of insertRowSQL

	finishUpdate string // finishUpdateSQL; %s: rows of finishRowSQL
	finishDelete string // finishDeleteSQL; %[1]s: marks, %[2]s: rows of "(?,?,?)"

	extendLeases string // extendLeasesSQL; %[1]s: marks, %[2]s: whens

	depsInsert   string // depsInsertSQL; %s: rows of depsInsertRowSQL
	lockDeps     string // lockDependenciesSQL; %s: marks
	archivedDeps string // archivedDependenciesSQL; %s: marks
	insertEdges  string // insertEdgesSQL; %s: rows of "(?,?,?)"
	workflowSelf string // workflowSelfSQL
}

// newStatements fills the table names t and the job column list into the
// statements ({jobs}, {queues}, {archive}, {deps} and the claim's
// {claimed} in their text).
func newStatements(t sqlq.Tables) statements {
	r := strings.NewReplacer("{jobs}", t.Jobs, "{queues}", t.Queues, "{claimed}", sqlq.ClaimedColumns,
		"{archive}", t.Archive, "{deps}", t.Deps)
	stmt := func(q string) string { return strings.TrimSpace(r.Replace(q)) }
	return statements{
		claim:            stmt(claimSQL),
		limitedCands:     stmt(limitedCandidatesSQL),
		limitedCandsPart: stmt(limitedCandidatesPartSQL),
		limitedClaim:     stmt(limitedClaimSQL),
		insert:           stmt(insertSQL),
		finishUpdate:     stmt(finishUpdateSQL),
		finishDelete:     stmt(finishDeleteSQL),
		extendLeases:     stmt(extendLeasesSQL),
		depsInsert:       stmt(depsInsertSQL),
		lockDeps:         stmt(lockDependenciesSQL),
		archivedDeps:     stmt(archivedDependenciesSQL),
		insertEdges:      stmt(insertEdgesSQL),
		workflowSelf:     stmt(workflowSelfSQL),
	}
}

// marks returns n comma-separated "?": the items of an IN list.
func marks(n int) string { return rows("?", n) }

// rows returns n copies of row separated by commas: a VALUES list.
func rows(row string, n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat(row+",", n-1) + row
}

// whens returns the n arms "WHEN ? THEN ?" of a CASE id … END, which binds
// a value to each id (its arguments: id, value, id, value, …).
func whens(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("WHEN ? THEN ? ", n-1) + "WHEN ? THEN ?"
}
