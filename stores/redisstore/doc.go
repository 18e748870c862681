// Package redisstore is a Stem store on Redis 7.0 or later, built on
// github.com/redis/go-redis/v9.
//
// Every change that touches more than one key is one Lua script, so it is
// atomic: Redis runs a script to its end before any other command. A script
// does not roll back, so each one validates everything (run status, fencing
// token, event target) before its first write, and each carries a "#!lua"
// shebang so that a server out of memory refuses it up front instead of
// failing halfway; the scripts that only read are declared no-writes, so
// a full server still answers them. Scripts are sent once and then called
// by their SHA1.
//
// The code is laid out as every Stem store is: redisstore.go has Options,
// Open, New and Close; runs.go, lease.go, checkpoint.go, events.go,
// control.go, executions.go, catalog.go, queues.go, schedules.go,
// purge.go, workers.go, interact.go and notify.go the methods of
// storage.Store by concern (start.go the creates with start policies, events or keys,
// which CreateRuns hands on; attrs.go the encoding of search attributes
// and of the listings they filter); keys.go builds the keys listed below;
// scripts.go assembles and loads the Lua scripts of scripts/ (one file
// per script, the parts they share in scripts/lib/); codec.go encodes
// what the scripts store;
// timeout.go bounds every call by Options.CallTimeout and reports it to a
// storage.Health, which logs a server that stops answering once per
// episode; policy.go re-checks the eviction policy for Claim; existing.go
// marks and recognises a prefix that holds a store
// (Options.OpenExisting) and upgrades an older layout.
//
// Readiness and lease expiry are judged on one clock: the server's TIME,
// read inside the script that decides, or Options.Clock when set (tests).
//
// A checkpoint that carries the run's completion
// (storage.CheckpointRequest.Complete) runs a script of its own,
// scripts/ride.lua, built of the parts the checkpoint and complete
// scripts share (scripts/lib/holder.lua): a run's last step and its end
// cost one call, and the plain checkpoint's script carries none of the
// completion's code.
//
// # Durability
//
// The store is exactly as durable as the server's persistence settings:
//
//   - No persistence (appendonly no, no RDB snapshots): every run is lost
//     when Redis restarts.
//   - RDB snapshots only: everything written since the last snapshot is lost
//     on a crash.
//   - appendonly yes with appendfsync everysec (the usual setting): up to
//     about one second of acknowledged writes is lost if the server or its
//     machine crashes; a step acknowledged in that window may run again.
//     A lease claimed in that window is forgotten too, so its fencing token
//     can be handed out again: two workers may then hold the same run until
//     one's lease ends. Checkpoints stay write-once, but steps may run twice.
//   - appendonly yes with appendfsync always: each write is fsynced to the
//     append-only file before Redis replies, so an acknowledged checkpoint
//     survives a crash. This is what Stem's exactly-once checkpoint promise
//     needs; it costs an fsync per write.
//
// Replication is asynchronous: a failover to a replica can lose
// acknowledged writes whatever the persistence settings are, since a
// master replies before its replicas have the write. A lost checkpoint's
// step runs again; a lost claim can hand a fencing token out twice. Set
// Options.WaitReplicas (wait_replicas=N in a cluster URL) to make every
// write wait, with WAIT on
// its own connection, until that many replicas hold it: with one replica
// per master and WaitReplicas 1, a single master's failure loses no
// acknowledged write (Redis promotes the replica with the most of the
// master's stream), at the cost of a replication round trip per write. On
// the server side, min-replicas-to-write 1 with min-replicas-max-lag makes
// a master that has lost its replicas refuse writes instead of taking
// writes no replica will see. Neither makes Redis a consensus store: a
// master and the replicas holding a write failing together still lose it.
//
// The store also needs maxmemory-policy noeviction: an evicting policy
// silently deletes keys, and an evicted key is a lost or corrupted run. Open
// and New refuse any other policy unless Options.AllowEvictingPolicy is set,
// and then log a warning; Claim reads the policy again every
// Options.PolicyCheckInterval and refuses to take work while it is not
// noeviction. With noeviction, a full server rejects writes with an error
// and nothing is lost, and the read methods still answer.
//
// # Keys
//
// Every key starts with Options.Prefix (default "stem:"), so applications
// sharing a server do not see each other. Under the prefix:
//
//	r:<id>          hash: the run record, which also describes its current
//	                execution (number, start, end, where it was forked),
//	                with its deadline (dl), published progress (pg, marked),
//	                registered wait (wk, wt, wn, wd, and wa: its further
//	                cases, key, topic and kind each ended by a NUL byte),
//	                the counter of its buffered events (es), and, each
//	                absent for the default, its queue (qu), lane (ln),
//	                partition (pt), priority (pr), workflow version (vr;
//	                a run stored before versions were kept has none and
//	                reads 0), headers (hd, a JSON object; a run stored
//	                before headers were kept has none and reads none) and
//	                hold (hl, a JSON object, set by the Suspend that holds
//	                the run and deleted by its next claim; a run stored
//	                before holds were kept has none) and requested
//	                cancellation (cq, the first request's reason after a
//	                marker byte, so that an empty reason is still there;
//	                set by Cancel or a parent's end, kept by a
//	                continue-as-new, deleted by a restart; a run stored
//	                before cancellations were kept has none and reads
//	                not cancelled) and search attributes (at, each
//	                name, type and value as text, ended by NUL bytes,
//	                see attrs.go; absent for none, as in every run
//	                stored before attributes were kept; set by the
//	                create, merged by a checkpoint that sets some, kept
//	                by a restart and a continue-as-new)
//	c:<id>          hash: checkpoint key → encoded checkpoint (with its sequence
//	                number and execution, and its call's input when
//	                given) of the current execution
//	a:<id>          list: encoded attempts of the current execution, in the
//	                order recorded
//	x:<id>          list: the run's ended executions that a restart or a
//	                continue-as-new replaced, oldest first
//	cx:<n>:<id>     hash: the checkpoints of ended execution n (c:<id> renamed
//	                by the restart or continue-as-new that ended it, so the
//	                current execution's keys, which replay reads, never
//	                grow with the number of executions)
//	ax:<n>:<id>     list: the attempts of ended execution n (a:<id> renamed)
//	ch:<id>         sorted set (all scores 0): the runs created with <id> as
//	                their parent, read in lexicographic order (ListRuns by
//	                parent, Terminate's cascade)
//	e:<n>:<id>:<t>  list: events buffered for run <id> on topic <t> (n = length
//	                of id), each seq:marked-payload, seq from the run's es
//	                counter, so a wait with several cases takes the oldest
//	q:<lane><wf>    sorted set: runs of the workflow in a queue at a
//	                priority and version that are ready to claim (queued
//	                or waiting with a ReadyAt), scored by ReadyAt (µs);
//	                the lane is "" for the default queue at priority 0
//	                and version 0 (q:<wf>, layout 1's key),
//	                <queue>:<priority>: for version 0 otherwise, and
//	                <queue>:<priority>:<version>: for another version (no
//	                name holds a colon)
//	l:<lane><wf>    sorted set: running runs of the workflow in the lane,
//	                scored by lease expiry (µs)
//	lv:<queue>:<wf> sorted set: the priorities other than 0 that the
//	                workflow's runs in the queue have lanes at (member and
//	                score the priority); Claim and NextWake read the lanes
//	                it names besides priority 0's, and Claim forgets a
//	                priority whose lanes are empty at every version
//	vs:<queue>:<wf> set: the workflow versions other than 0 that runs of
//	                the workflow were created at in the queue, whose
//	                lanes Claim and NextWake read for a workflow they
//	                take at any version; it keeps a version once added
//	iq:<queue>, iqs:<status>:<queue>
//	                sorted sets (all scores 0): the listing indexes of a
//	                queue other than the default: its runs, and its runs in
//	                a status; iqs:running:<queue> holds the queue's places.
//	                The default queue has none, so that its runs cost
//	                nothing more than in layout 1: its counts are all runs'
//	                (is:<status>) less every other queue's (qn)
//	qn              set: the queues other than the default that runs were
//	                created on
//	qf:<queue>      sorted set: the queue's queued runs, scored by ReadyAt
//	                (µs), while they stay queued (the run hash's qf flag
//	                marks them): QueueStats counts those not yet due (a
//	                delayed start, a restart fenced by a live lease) as
//	                scheduled and the others as ready, and the lowest
//	                score of those is the oldest ready run's ReadyAt
//	pr:<queue>:<p>  set: the running runs of the queue's partition p, whose
//	                size PartitionConcurrency bounds
//	qs:<queue>      sorted set: the queue's starts (a run's first claim
//	                since its creation or restart, the run hash's sd flag,
//	                or its creation leased), run ID:token scored by the
//	                time (µs), pruned to the rate window by each claim that
//	                names the queue's rate
//	qr              set: the queues a claim named with a rate when their
//	                window held no start (so that they had no qs:<queue>):
//	                a run created leased records its start in qs:<queue>
//	                only when that set exists or its queue is here, for
//	                only claims that name a rate prune it
//	fx:<status>, fx:<status>:<wf>
//	                sorted sets: the finished runs of a status (and
//	                workflow), scored by EndedAt (µs), which Purge reads
//	                oldest first; Restart takes a run out
//	et:<id>         set: the topics the run has had events buffered on, so
//	                that Purge finds their lists (a restart, which drops
//	                the run's buffered updates, takes theirs out)
//	up:<id>         hash: the run's updates, update ID → encoded request
//	                (Seq, creation time, name, headers, payload)
//	ur:<id>         hash: the replies to the run's updates, update ID →
//	                encoded reply (time, error, output), written once, by
//	                the checkpoint that carries it; an update without one
//	                is pending
//	ul:<id>         list: the run's update IDs in the order recorded, the
//	                update at index i of Seq i+1 (ListUpdates reads a
//	                range)
//	sv:<id>:<s>     list: the values of the run's stream s, each its write
//	                time and marked value, the value at index i the one at
//	                offset i (no stream name holds a colon)
//	sm:<id>         hash: the run's streams, name → closed flag and time
//	                of the last write, so that Purge finds their lists.
//	                Updates and streams are the run's, not an execution's:
//	                a continue-as-new or a restart keeps them (a restart
//	                buffers again, in Seq order, the pending updates its
//	                new execution has no delivery of), and Purge and a
//	                replacement delete them with the run
//	tk:<id>         string: the last lease token of a run a start
//	                policy's replacement deleted as a descendant of the
//	                run it replaced, kept when the run was ever claimed:
//	                the next run created under the ID starts its tokens
//	                from it and deletes it (one GETDEL per run created).
//	                It expires a day after the deleted run's lease would
//	                have ended, so the keys of IDs never taken again go
//	                away; Purge leaves it
//	w:<topic>       set: runs with a case of their wait on the topic
//	ia, iw:<wf>, is:<status>, iws:<status>:<wf>
//	                sorted sets (all scores 0): the listing indexes, read in
//	                lexicographic order either way, an ID prefix a range
//	                of each; CountRuns reads the sizes of is:<status>
//	                (iws:<status>:<wf> for a workflow)
//	ic, icw:<wf>    sorted sets: every run, and the workflow's, scored by
//	                CreatedAt (µs), runs created at the same microsecond
//	                in lexicographic order: ListRuns in creation order
//	ae:<name>:<type>:<value>
//	                sorted set: the runs with the search attribute (type
//	                s, n, t or b; the value as the at field writes it),
//	                scored by CreatedAt (µs)
//	an:<name>, at:<name>
//	                sorted sets: the runs with the number or time
//	                attribute, scored by its value (a time in µs)
//	as:<name>       sorted set (all scores 0): value, a NUL byte and run
//	                ID of each run with the string attribute, so that a
//	                prefix is a lexicographic range. A run leaves each
//	                attribute index when the value changes or it is
//	                deleted (Purge, a replacement)
//	cat:w, cat:e, cat:q
//	                hashes: the catalog, workflow name → encoded
//	                WorkflowType (with its queue, retention and timeout), topic →
//	                encoded EventType and queue name → encoded QueueType
//	s:<id>          hash: a schedule: its revision (rev), creation and
//	                update times (ca, ua) and the rest as JSON (j)
//	sc              sorted set: the unpaused schedules by CheckAt (µs),
//	                then ID, which ListSchedules reads with DueBy
//	si              sorted set (all scores 0): every schedule's ID, read in
//	                lexicographic order
//	wr              hash: the workers' records, worker ID → heartbeat \n
//	                expiry \n the rest as JSON, the times in µs
//	wx              sorted set: the worker IDs by the expiry of their
//	                records (µs), by which PutWorker and ListWorkers drop
//	                the expired ones
//	op:<random>     string, expires after a minute: the reply of one
//	                SendEvent, SendUpdate, Emit or Restart call, so that a
//	                repeated call is answered without delivering twice or
//	                beginning another execution
//	v               string: the version of this key layout (4), which marks
//	                the prefix as a Stem store (see Options.OpenExisting)
//	wake            pub/sub channel: runs may be ready (see Notifications)
//	ended           pub/sub channel: the ID of each run that ends, and the
//	                announcements of replies and stream writes
//	                (storage.UpdateAnnouncement, StreamAnnouncement; see
//	                Finished)
//	probe           string: the counter ProbeCommits increments, deleted
//	                before it returns
//
// # Queues
//
// Claim takes runs level by level, highest priority first: at each
// level the expired leases of every named queue, workflow and version,
// then the ready runs, each oldest first, reading each lane's sets in
// rounds of as many as it still needs. Limits are judged for ready runs
// only (a recovery keeps its place): a queue's running index against
// Concurrency, a partition's running set against PartitionConcurrency,
// the starts in the queue's rate window against Rate; a run that does
// not fit is passed over, at most a thousand per claim. A claim of queues
// without limits reads no count, so the default queue's claim costs one
// read of its levels set per workflow more than in layout 1 (and one of
// its versions set for a workflow taken at any version), and nothing
// more per run: a run it cannot pass over (a recovery, or a ready run of
// a queue without limits) is read in one call, not two, which pays for
// its removal from its queue's set of queued runs (qf:<queue>).
//
// A run created leased (storage.NewRun.Lease, an eager start) is written
// by the create script as a claim leaves a run it takes: running, in its
// lane's lease set, its place held in its queue's running index and its
// partition's set, its start recorded when the queue is rated (see qr
// above). A batch without such a run runs a create script that carries
// none of that code.
//
// QueueStats reads each queue's counts from the sizes of its status
// indexes, and its scheduled runs and the age of its oldest ready run
// from its set of queued runs, which is scored by ReadyAt whatever the
// runs' priorities, lanes and versions: a few reads per queue, never a
// scan.
//
// # Start policies
//
// A batch with a run that has a start policy (storage.NewRun.OnExisting,
// OnEnded), an event or a start key runs scripts/createpolicy.lua, and
// any other batch the create scripts above, which carry none of its code.
// For each run it judges, in the one script that creates: the start key
// (a held key is joined), the run of the ID (returned, refused or
// replaced) and the event (sent as SendEvent sends it, to the run the
// create leaves). A replacement reads the run's whole family first, so
// that an unfinished descendant that does not end with it refuses it
// before any write; it then terminates the run as Terminate does
// (terminate_run in scripts/lib/state.lua), and any descendant still
// unfinished, and deletes them all as Purge deletes a run (drop_run in
// scripts/lib/family.lua) with their children indexes and their start
// keys' records. The new run's lease tokens continue the old run's, so a
// holder of the old run's lease never holds a lease of the new one; and
// the last token of each descendant ever claimed is kept (tk:<id>) for
// the next run created under its ID, such as the new run's child of the
// same ID, whose tokens continue it, so that the deleted descendant's
// holder never holds that run's lease either. Those keys expire a day
// after the deleted runs' leases would have ended: far longer than a
// holder acts on a lease it lost (its next write or heartbeat, a second
// apart by default, finds the run gone), and bounded retention for IDs
// that no run takes again, at most a day's replaced descendants.
//
// # Workflow versions
//
// A run's workflow version (storage.NewRun.Version) is part of its lane,
// so each version of a workflow has ready and lease sets of its own, in
// each queue and at each priority. A claim with a Versions entry for a
// workflow reads the lanes of the versions listed and no others: runs of
// versions no worker can run any more, however many, cost a claim nothing
// and never use up its limit or its budget of runs passed over. A workflow
// without an entry is read at version 0 and at each version of its
// versions set. Reading a version's lanes costs two calls of the script,
// so a claim of several workflows first asks with one call, for each that
// it takes at several versions, whether any of those lanes exists at the
// level: an idle workflow costs it that one call. The lanes of version 0
// are layout 2's, so a store written before versions were kept is read
// unchanged and needs no upgrade; code that predates versions claims none
// of the runs of other versions.
//
// NextWake reads the same lanes a claim would. No listing index serves a
// Versions filter or a creation range: ListRuns applies them to the runs
// it reads from the index of its other filters, so a page of a rare
// version, or of a range the ID order reaches late, may read many runs
// of others.
//
// # Search attributes and listings by creation
//
// A run's search attributes are a field of its hash, and each is in the
// equality index of its name, type and value (scored by the run's
// creation) and, for a number, time or string, in its name's range or
// prefix index (see Keys). A create writes them with the run; a
// checkpoint that sets some runs scripts/interact.lua, which merges them
// in the same call (a plain checkpoint's script and arguments are as
// before attributes; a checkpoint keeps its call's input in its stored
// result, which only a checkpoint given one has); Purge and a
// replacement delete them with the run.
//
// A listing in creation order (storage.OrderCreated), of top-level runs
// or filtered by attributes runs scripts/find.lua, the others
// scripts/list.lua as before. find.lua applies every filter to each run
// it reads, and chooses for each page what to read by the number of
// runs each attribute filter's index range holds (a ZCARD, ZCOUNT or
// ZLEXCOUNT each): it walks the listing's order (the query's listing
// index in ID order; the index by creation, all runs' or the workflow's,
// in creation order, from the cursor's rank) or, in creation order, an
// equality filter's index, which is in that order too, passing over the
// runs that fail the other filters; or it reads every run of the
// smallest filter's range (or in creation order of the other filters'
// listing index, such as a parent's children) and sorts those that pass.
// A page filtered by equality in creation order is so a range read of
// one index, newest first or oldest; in ID order, or with only range and
// prefix filters, a page costs either the runs the walk passes over or
// the runs the filter's range holds, whichever the counts say is less.
// The walk's estimate takes the matches as spread evenly over the order;
// a walk that has read four times its estimate (and at least a thousand
// runs) before its page is full sorts the rest of the page from where it
// got to, so matches far from where it began cost it that budget and the
// smallest range, never a scan of every run. Without an attribute filter
// (a listing in creation order, or of top-level runs) there is nothing to
// sort: the walk applies TopLevel and the other filters that no index
// serves to what it reads, as list.lua does in ID order.
//
// # Layout versions
//
// Layout 2 keeps every key of layout 1: its runs are the default queue's
// at priority 0. Layout 3 keeps every key of layout 2, and puts every
// queued run in its queue's set of queued runs, where layout 2 put only
// those queued before they were due. Layout 4 keeps every key of layout
// 3 and adds the indexes by creation (ic, icw:<wf>). A worker's Open of a
// layout-1, 2 or 3 store upgrades it in place in one script, which adds
// what the current layout keeps besides (from layout 1: finished
// indexes, started flags, event topics; from 1 or 2: the queued runs'
// places in their queues' sets; from any: every run's places in the
// indexes by creation; see scripts/upgrade.lua); workers of the older code must
// be stopped first (one that goes on leaves out of the sets the runs it
// queues when due, so QueueStats finds the oldest ready run younger than
// it is until those are claimed; it does take out, by their flag, the
// runs it claims). OpenExisting, which writes nothing, refuses a store of
// an older layout with storage.ErrNotStore. Runs' headers, holds and
// cancellation requests need no upgrade: a run stored without them reads
// none. Nor do start keys (sk:<wf>:<key> and the run hash's sk field),
// which came within layout 3: they are a new key and a new field that no
// run stored before has and no older code reads, so a store without them
// simply has no key held. Code that predates them purges a run without
// deleting its key's record, which then holds nothing (its run is gone).
// Kept tokens (tk:<id>) came within layout 3 too: code that predates them
// neither writes nor reads them, so a run it creates under a kept ID
// starts its tokens at 0 as before, and leaves the key to expire (a
// replacement that finds it keeps the greater token).
// Updates and streams (up:, ur:, ul:, sv:, sm:) came within layout 3
// too: new keys no run stored before has, so a run without them has no
// updates and no streams. Code that predates them deletes a run (Purge,
// a replacement) without them, leaving them to a later run of the ID:
// stop its workers before runs use updates or streams. Search attributes
// (the at field, ae:, an:, at:, as:) and checkpoints' inputs came with
// layout 4 and need no upgrade: a run stored before has none.
//
// With Redis Cluster every script must find its keys in one slot. A Store
// on a cluster client needs a prefix with a hash tag, such as "{stem}:"
// (New refuses one without), and all of its data then lives on one
// master. A Cluster (OpenCluster, NewCluster) spreads the data instead.
//
// # Redis Cluster
//
// A Cluster store is a fixed number of shards (ClusterOptions.Shards,
// recorded under <prefix>shards when the store is created), each a
// complete store of the layout above under the prefix <prefix>{i.j}:,
// whose hash tag puts all of its keys in one slot, chosen in the i-th of
// equal ranges of the 16384 slots so that a cluster whose masters hold
// equal ranges holds equal numbers of shards. Every script still touches
// one slot; the cluster moves whole shards between masters (resharding
// moves a shard's slot, and while its keys move, that shard's scripts are
// retried). Every shard announces wake-ups and ends on the channels of
// <prefix>, which the store subscribes to once.
//
// Where a run lives, and the locators (<prefix>{home}:loc:<id>, a string
// holding the shard's index) that find a run living off its ID's home
// shard, are described on Cluster. What spans shards is a sequence of
// single-shard calls, each safe to repeat:
//
//   - Claim asks the shards in turn, from another one each call, until it
//     has its limit; NextWake takes the soonest of the shards'.
//   - Emit delivers on every shard (each shard's delivery is one script);
//     ListRuns (but for a parent's children, on the parent's shard),
//     ListSchedules, CountRuns, QueueStats and Purge merge or add up the
//     shards' answers.
//   - A run's end whose Notify goes to a run on another shard writes an
//     outbox entry (<shard>ob) before the end and sends the event after it
//     under the entry's operation ID, which the receiver keeps for a day; a
//     sweep at claims finishes what a crash left (see outbox.go).
//   - A create that spans shards is one script per shard: a failure can
//     leave some shards' runs created, and the same batch again finishes
//     it. A child whose parent lives elsewhere gets its locator first.
//   - The catalog and the worker records live on the first shard; each
//     schedule on the shard its ID hashes to, with the runs its ticks
//     start.
//
// With more than one shard the store lacks queue limits (a claim or a
// catalog naming a limited queue is refused with storage.ErrUnsupported,
// and an engine's Run with such a queue fails at once) and one order
// across the store: priorities and the oldest ready first hold within a
// shard, and claims visit the shards in turn (storage.Partial). One shard
// has the whole contract.
//
// go-redis sends a command again when its reply was lost (a read timeout, a
// dropped connection), so a script may run twice. Each is safe to repeat: a
// repeated Cancel finds the request recorded and changes nothing; a
// repeated checkpoint finds its own write and reports it as Existing, so
// its reply and stream values are not written twice; a repeated Suspend,
// Complete, ContinueAsNew or Terminate finds the run already changed and
// reports a lost lease or an invalid state; SendEvent, SendUpdate, Emit
// and Restart carry an operation ID and a repeat returns the first reply,
// so an event or update is never buffered or delivered twice and a
// restart begins one execution, not two; a repeated RecordAttempts
// records its attempts twice, which changes no attempt count (the runtime counts by
// attempt number); a repeated CreateRuns reports the runs it had just
// created as existing, and so leaves those it created leased to nobody
// until their lease expires, as a repeated Claim does, unless a run of
// its batch has a start policy, an event or a start key: that batch
// carries an operation ID too, and a repeat returns the first results
// (with the runs as they are then), so it never joins, replaces or
// delivers twice; a repeated Claim
// leaves the first reply's runs leased to nobody until their lease
// expires (they are then recovered); a repeated Checkpoint that
// completed the run finds it finished and reports a lost lease, as a
// repeated Complete does.
package redisstore
