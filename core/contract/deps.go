package contract

// DependencyPolicy is what a dependency that ends cancelled, discarded or
// deleted does to the jobs waiting for it.
type DependencyPolicy string

// The dependency policies.
const (
	// DependencyCancel (the default, "") cancels the waiting job, and so
	// in turn the jobs waiting for it: a step whose input failed does not
	// run.
	DependencyCancel DependencyPolicy = ""
	// DependencyRun counts a failed dependency as settled: the job runs
	// once every dependency has ended, whatever its end.
	DependencyRun DependencyPolicy = "run"
)

// Valid reports whether p is DependencyCancel or DependencyRun.
func (p DependencyPolicy) Valid() bool { return p == DependencyCancel || p == DependencyRun }

// Limits of dependencies and workflows.
const (
	// MaxDependencies is the most jobs one job may depend on: a batch's
	// callback depends on every job of the batch.
	MaxDependencies = 100_000
	// MaxStepLen is the longest step name, in bytes.
	MaxStepLen = 255
	// CauseDependency is the Cause of the error entry of a job cancelled
	// because a dependency ended cancelled, discarded or deleted under
	// DependencyCancel.
	CauseDependency = "dependency_failed"
)

// Dependencies is an optional capability of a Store: jobs that wait for
// other jobs. A store implements it by honouring InsertParams.DependsOn,
// DependsOnIndex, OnDependencyFailure and Step, as follows; the Client
// refuses these fields with ErrUnsupported on a store without it, so no
// other store ever sees them set.
//
// At insert, a job with dependencies counts those not yet settled: a
// dependency settles when it completes, or when it ends cancelled,
// discarded or deleted (removed by Delete; a job pruned or archived after
// its end settled then). A completed dependency, or under DependencyRun
// any ended one, is settled already. Under DependencyCancel a dependency
// already cancelled or discarded, or one whose id no job has, cancels the
// job at insert. With dependencies left the job is inserted waiting
// (StateWaiting, Job.WaitingFor the count) and never claimed; with none
// left it is inserted as any job, available or scheduled by its RunAt
// (storetest rules deps/waits-until-every-dependency-completed,
// deps/settled-dependencies-count-at-insert).
//
// When a dependency settles, in the same transaction as the change that
// settled it (Finish, CompleteTx, Cancel, Delete, Rescue, RescueWorkers,
// DiscardExpired), every job waiting for it counts one less; the one that
// counts to 0 becomes available, or scheduled when its RunAt is still
// ahead. A dependency that ended cancelled, discarded or deleted cancels
// instead a waiting job whose policy is DependencyCancel: FinishedAt is
// the change's time and an error entry of Cause CauseDependency names
// the dependency; that cancel settles the jobs waiting for it in turn,
// in the same transaction (rules deps/failed-dependency-cancels-dependants,
// deps/run-policy-runs-after-a-failed-dependency,
// deps/deleted-dependency-counts-as-cancelled). A waiting job is released
// once, whichever settles its last dependency and however many handles
// settle dependencies at once (rule
// deps/concurrent-settles-release-once).
//
// Job.DependencyEnds counts the settled dependencies by their end (a
// deleted one as cancelled), from insert on, up to the one that released
// or cancelled the job (rule deps/dependency-ends-are-counted).
//
// The jobs of one Insert call that name a Step or set InWorkflow carry
// the id of the first of them as WorkflowID; ListParams.WorkflowID keeps
// the jobs of one workflow, and WorkflowFirst the first job of each (rule
// deps/list-by-workflow).
//
// A waiting job can be cancelled or deleted like any job not running
// (settling its own dependants), and DiscardExpired discards it once its
// deadline passed, as a pending job (rule
// deps/waiting-job-past-its-deadline-is-discarded); Retry of a waiting job returns
// ErrInvalidState (it would run before its dependencies). Stats counts
// waiting jobs under StateWaiting; Get and List return DependsOn,
// WaitingFor, OnDependencyFailure, Step and WorkflowID (rule
// deps/jobs-read-back-with-their-dependencies).
//
// An index in DependsOnIndex that is negative or not below the job's own
// index, an id below 1, more than MaxDependencies dependencies, a step
// name over MaxStepLen or used twice in one call, or an unknown policy
// returns an error wrapping ErrInvalidArgument and inserts nothing (rule
// deps/invalid-references-insert-nothing).
type Dependencies interface {
	// SupportsDependencies marks the capability; it does nothing.
	SupportsDependencies()
}
