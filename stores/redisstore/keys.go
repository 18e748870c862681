package redisstore

import (
	"cmp"
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

// ready is the workflow's sorted set of runs ready to claim in the
// default queue at priority 0, scored by ReadyAt in microseconds
// (q:<workflow>, the key of layout 1).
func (k keyspace) ready(wf string) string { return k.prefix + "q:" + wf }

// leases is the workflow's sorted set of running runs in the default
// queue at priority 0, scored by lease expiry in microseconds
// (l:<workflow>).
func (k keyspace) leases(wf string) string { return k.prefix + "l:" + wf }

// lane names a queue, priority and workflow version in the keys of its
// ready and lease sets: "" for the default queue at priority 0 and
// version 0, <queue>:<priority>: for version 0 otherwise, and
// <queue>:<priority>:<version>: for another version (no queue or
// workflow name holds a colon).
func lane(queue string, priority, version int) string {
	if version != 0 {
		return cmp.Or(queue, storage.DefaultQueue) + ":" + strconv.Itoa(priority) + ":" + strconv.Itoa(version) + ":"
	}
	if (queue == "" || queue == storage.DefaultQueue) && priority == 0 {
		return ""
	}
	return cmp.Or(queue, storage.DefaultQueue) + ":" + strconv.Itoa(priority) + ":"
}

// laneReady is the ready set of the workflow's runs in the queue at the
// priority and version (q:<lane><workflow>).
func (k keyspace) laneReady(wf, queue string, priority, version int) string {
	return k.prefix + "q:" + lane(queue, priority, version) + wf
}

// laneLeases is the lease set of the workflow's runs in the queue at the
// priority and version (l:<lane><workflow>).
func (k keyspace) laneLeases(wf, queue string, priority, version int) string {
	return k.prefix + "l:" + lane(queue, priority, version) + wf
}

// levels is the sorted set of the priorities other than 0 that the
// workflow's runs in the queue have in its ready and lease sets (lv:<queue>:<workflow>),
// member and score the priority.
func (k keyspace) levels(queue, wf string) string { return k.prefix + "lv:" + queue + ":" + wf }

// versions is the set of the workflow versions other than 0 that runs of
// the workflow in the queue were created at (vs:<queue>:<workflow>): the
// versions whose lanes a claim of the workflow at any version reads.
func (k keyspace) versions(queue, wf string) string { return k.prefix + "vs:" + queue + ":" + wf }

// queued is the queue's sorted set of queued runs, scored by ReadyAt in
// microseconds (qf:<queue>): QueueStats counts those not yet due as
// scheduled, and the lowest score of the others is the oldest ready
// run's ReadyAt.
func (k keyspace) queued(queue string) string { return k.prefix + "qf:" + queue }

// partition is the set of the running runs of a queue's partition
// (pr:<queue>:<partition>).
func (k keyspace) partition(queue, partition string) string {
	return k.prefix + "pr:" + queue + ":" + partition
}

// starts is the queue's sorted set of the starts within its rate window,
// run ID:token scored by the time (qs:<queue>).
func (k keyspace) starts(queue string) string { return k.prefix + "qs:" + queue }

// ratedQueues is the set of the queues a claim has named with a rate
// when their rate window held no start, so that no set of starts stood
// for them (qr): a create that leases a run of such a queue records its
// start.
func (k keyspace) ratedQueues() string { return k.prefix + "qr" }

// queueNames is the set of the queues other than the default that runs
// were created on (qn).
func (k keyspace) queueNames() string { return k.prefix + "qn" }

// indexQueue is the listing index of a queue's runs (iq:<queue>); the
// default queue has none (see indexQueueStatus).
func (k keyspace) indexQueue(queue string) string { return k.prefix + "iq:" + queue }

// indexQueueStatus is the listing index of a queue's runs in the status
// (iqs:<status>:<queue>); its running index counts the queue's places.
// The default queue has none: its runs are all runs less the other
// queues'.
func (k keyspace) indexQueueStatus(st storage.RunStatus, queue string) string {
	return k.prefix + "iqs:" + string(st) + ":" + queue
}

// finished is the sorted set of the runs that finished in the status,
// scored by EndedAt in microseconds (fx:<status>), which Purge reads.
func (k keyspace) finished(st storage.RunStatus) string { return k.prefix + "fx:" + string(st) }

// finishedWorkflow is finished for the workflow's runs
// (fx:<status>:<workflow>).
func (k keyspace) finishedWorkflow(st storage.RunStatus, wf string) string {
	return k.prefix + "fx:" + string(st) + ":" + wf
}

// eventTopics is the set of the topics the run has had events buffered
// on (et:<id>), so that Purge finds their lists.
func (k keyspace) eventTopics(id string) string { return k.prefix + "et:" + id }

// updates is the run's hash of update ID → encoded update request
// (up:<id>): its Seq, creation time, name, headers and payload, as
// update.lua writes them (see decodeUpdate).
func (k keyspace) updates(id string) string { return k.prefix + "up:" + id }

// replies is the run's hash of update ID → encoded reply (ur:<id>),
// written once, by the checkpoint that carries it: an update without an
// entry is pending.
func (k keyspace) replies(id string) string { return k.prefix + "ur:" + id }

// updateOrder is the run's list of update IDs in the order recorded
// (ul:<id>): the update at index i has Seq i+1, so the length is the
// last Seq and ListUpdates reads a range.
func (k keyspace) updateOrder(id string) string { return k.prefix + "ul:" + id }

// streamValues is the list of the encoded values of the run's stream
// (sv:<id>:<stream>; no stream name holds a colon, so the last one
// splits the key), the value at index i the one at offset i.
func (k keyspace) streamValues(id, stream string) string {
	return k.prefix + "sv:" + id + ":" + stream
}

// streams is the run's hash of stream name → encoded stream state
// (sm:<id>): closed flag and time of the last write; its fields are the
// run's streams, by which Purge finds their lists.
func (k keyspace) streams(id string) string { return k.prefix + "sm:" + id }

// startKey is the record of a workflow's start key (storage.StartKey):
// a string holding the ID of the run created with the key last
// (sk:<workflow>:<key>; no workflow name holds a colon). That run's hash
// names the key (its sk field), so a record whose run is gone, or was
// replaced by one without the key, holds nothing.
func (k keyspace) startKey(wf, key string) string { return k.prefix + "sk:" + wf + ":" + key }

// keptToken is the last lease token of a run that a start policy's
// replacement deleted with the run it replaced, a descendant that was
// ever claimed (tk:<id>): the next run created under the ID starts its
// tokens from it and deletes it, so that the deleted run's holder never
// matches that run's lease. It expires a day after the deleted run's last
// lease would have (see keep_token in scripts/lib/family.lua).
func (k keyspace) keptToken(id string) string { return k.prefix + "tk:" + id }

// schedule is a schedule's hash (s:<id>).
func (k keyspace) schedule(id string) string { return k.prefix + "s:" + id }

// schedulesDue is the sorted set of the unpaused schedules, scored by
// CheckAt in microseconds (sc).
func (k keyspace) schedulesDue() string { return k.prefix + "sc" }

// scheduleIDs is the sorted set of every schedule's ID, all scores 0, read
// in lexicographic order (si).
func (k keyspace) scheduleIDs() string { return k.prefix + "si" }

// catalogQueues is the catalog's hash of queue name → encoded
// storage.QueueType (cat:q).
func (k keyspace) catalogQueues() string { return k.prefix + "cat:q" }

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

// indexCreated is the index of every run by creation (ic): a sorted set
// of run IDs scored by CreatedAt in microseconds, runs created at the
// same microsecond in lexicographic order of their IDs, as
// storage.OrderCreated lists them.
func (k keyspace) indexCreated() string { return k.prefix + "ic" }

// indexWorkflowCreated is indexCreated for the workflow's runs
// (icw:<wf>).
func (k keyspace) indexWorkflowCreated(wf string) string { return k.prefix + "icw:" + wf }

// attrEqual is the equality index of a search attribute's name, type and
// value (ae:<name>:<type>:<value>, the type's attrCode and the value's
// attrText; no name holds a colon, so the value is all that follows the
// type): the runs that have it, scored by CreatedAt in microseconds, so
// that it lists them in storage.OrderCreated.
func (k keyspace) attrEqual(a storage.Attr) string {
	return k.prefix + "ae:" + a.Name + ":" + attrCode(a.Type) + ":" + attrText(a)
}

// attrNumbers is the range index of the number attribute name (an:<name>):
// the runs that have it, scored by its value.
func (k keyspace) attrNumbers(name string) string { return k.prefix + "an:" + name }

// attrTimes is the range index of the time attribute name (at:<name>):
// the runs that have it, scored by its value in microseconds (a double,
// exact within 285 years of 1970; a read of a range beyond compares the
// values themselves).
func (k keyspace) attrTimes(name string) string { return k.prefix + "at:" + name }

// attrStrings is the prefix index of the string attribute name
// (as:<name>): all scores 0, each member the value, a NUL byte and the
// run's ID, so that a prefix of the values is a lexicographic range.
func (k keyspace) attrStrings(name string) string { return k.prefix + "as:" + name }

// listing is the listing index that serves a query and the filters the
// list script still applies to what it reads there (workflow, status and
// queue, "" for none). A parent filter reads the parent's children index,
// a queue other than the default its own indexes; the default queue has
// none, so its filter is applied to the index of the other filters.
func (k keyspace) listing(q storage.ListRunsQuery) (index, wf, st, queue string) {
	switch {
	case q.ParentID != "":
		return k.children(q.ParentID), q.Workflow, string(q.Status), q.Queue
	case q.Queue != "" && q.Queue != storage.DefaultQueue && q.Status != "":
		return k.indexQueueStatus(q.Status, q.Queue), q.Workflow, "", ""
	case q.Queue != "" && q.Queue != storage.DefaultQueue:
		return k.indexQueue(q.Queue), q.Workflow, "", ""
	case q.Workflow != "" && q.Status != "":
		return k.indexWorkflowStatus(q.Status, q.Workflow), "", "", q.Queue
	case q.Workflow != "":
		return k.indexWorkflow(q.Workflow), "", "", q.Queue
	case q.Status != "":
		return k.indexStatus(q.Status), "", "", q.Queue
	default:
		return k.indexAll(), "", "", q.Queue
	}
}

// op holds the reply of one SendEvent or Emit call for a minute, so that a
// repeated call is answered without delivering twice (op:<random>).
func (k keyspace) op(id string) string { return k.prefix + "op:" + id }

// wake is the pub/sub channel on which the scripts announce that runs may
// be ready (wake); see Notifications.
func (k keyspace) wake() string { return channelPrefix(k.prefix) + "wake" }

// ended is the pub/sub channel on which the scripts announce each run that
// ends, the message its ID; see Finished.
func (k keyspace) ended() string { return channelPrefix(k.prefix) + "ended" }
