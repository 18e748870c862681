package redisstore

import (
	"strconv"

	"github.com/stemflow/stem/storage"
)

// keyspace builds every key of the store from its prefix: the one definition
// of the layout that doc.go documents. The scripts build the keys of runs,
// workflows and topics other than those passed in KEYS themselves, with
// the helpers of scripts/lib/keys.lua; those mirror these one for one, and
// TestScriptKeys checks that both build the same keys.
type keyspace struct {
	prefix string
}

// run is the run's hash: the run record (r:<id>).
func (k keyspace) run(id string) string { return k.prefix + "r:" + id }

// checkpoints is the run's hash of checkpoint key → encoded checkpoint
// (c:<id>).
func (k keyspace) checkpoints(id string) string { return k.prefix + "c:" + id }

// attempts is the run's list of encoded attempts, in the order recorded
// (a:<id>).
func (k keyspace) attempts(id string) string { return k.prefix + "a:" + id }

// executions is the run's list of its ended executions that a restart or
// a continue-as-new replaced, oldest first (x:<id>); the current execution
// is described by the run hash itself.
func (k keyspace) executions(id string) string { return k.prefix + "x:" + id }

// pastCheckpoints is the hash of checkpoint key → encoded checkpoint of
// the run's ended execution n (cx:<n>:<id>): a restart or a
// continue-as-new renames the run's checkpoints hash to it, so the current
// execution's keys never hold an earlier execution's data.
func (k keyspace) pastCheckpoints(n int, id string) string {
	return k.prefix + "cx:" + strconv.Itoa(n) + ":" + id
}

// pastAttempts is the list of encoded attempts of the run's ended
// execution n (ax:<n>:<id>): a restart or a continue-as-new renames the
// run's attempts list to it.
func (k keyspace) pastAttempts(n int, id string) string {
	return k.prefix + "ax:" + strconv.Itoa(n) + ":" + id
}

// children is the children index of run id: the runs created with it as
// their parent, a sorted set with all scores 0 read in lexicographic order
// (ch:<id>).
func (k keyspace) children(id string) string { return k.prefix + "ch:" + id }

// catalogWorkflows is the catalog's hash of workflow name → encoded
// storage.WorkflowType (cat:w).
func (k keyspace) catalogWorkflows() string { return k.prefix + "cat:w" }

// catalogEvents is the catalog's hash of topic → encoded
// storage.EventType (cat:e).
func (k keyspace) catalogEvents() string { return k.prefix + "cat:e" }

// events is the list of events buffered for the run on the topic
// (e:<n>:<id>:<topic>, n the length of id, so that no run ID and topic
// pair shares a key with another). Each entry is seq:marked-payload, seq
// the next of the run hash's es counter, so that a wait with several cases
// takes the oldest of its topics' heads.
func (k keyspace) events(id, topic string) string {
	return k.prefix + "e:" + strconv.Itoa(len(id)) + ":" + id + ":" + topic
}

// ready is the workflow's sorted set of runs ready to claim, scored by
// ReadyAt in microseconds (q:<workflow>).
func (k keyspace) ready(wf string) string { return k.prefix + "q:" + wf }

// leases is the workflow's sorted set of running runs, scored by lease
// expiry in microseconds (l:<workflow>).
func (k keyspace) leases(wf string) string { return k.prefix + "l:" + wf }

// waiting is the topic's set of runs waiting on it (w:<topic>): those
// with a case of their wait on the topic, so that Emit finds them whichever
// case it is.
func (k keyspace) waiting(topic string) string { return k.prefix + "w:" + topic }

// indexAll is the listing index of every run (ia). The listing indexes
// are sorted sets with all scores 0, read in lexicographic order.
func (k keyspace) indexAll() string { return k.prefix + "ia" }

// indexWorkflow is the listing index of the workflow's runs (iw:<wf>).
func (k keyspace) indexWorkflow(wf string) string { return k.prefix + "iw:" + wf }

// indexStatus is the listing index of the runs in the status
// (is:<status>).
func (k keyspace) indexStatus(st storage.RunStatus) string { return k.prefix + "is:" + string(st) }

// indexWorkflowStatus is the listing index of the workflow's runs in the
// status (iws:<status>:<wf>).
func (k keyspace) indexWorkflowStatus(st storage.RunStatus, wf string) string {
	return k.prefix + "iws:" + string(st) + ":" + wf
}

// index is the listing index that serves the query's filters. A parent
// filter reads the parent's children index, which the list script filters
// by workflow and status itself.
func (k keyspace) index(q storage.ListRunsQuery) string {
	switch {
	case q.ParentID != "":
		return k.children(q.ParentID)
	case q.Workflow != "" && q.Status != "":
		return k.indexWorkflowStatus(q.Status, q.Workflow)
	case q.Workflow != "":
		return k.indexWorkflow(q.Workflow)
	case q.Status != "":
		return k.indexStatus(q.Status)
	default:
		return k.indexAll()
	}
}

// op holds the reply of one SendEvent or Emit call for a minute, so that a
// repeated call is answered without delivering twice (op:<random>).
func (k keyspace) op(id string) string { return k.prefix + "op:" + id }

// wake is the pub/sub channel on which the scripts announce that runs may
// be ready (wake); see Notifications.
func (k keyspace) wake() string { return k.prefix + "wake" }

// ended is the pub/sub channel on which the scripts announce each run that
// ends, the message its ID; see Finished.
func (k keyspace) ended() string { return k.prefix + "ended" }
