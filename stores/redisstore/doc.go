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
// control.go, executions.go, catalog.go and notify.go the methods of
// storage.Store by concern;
// keys.go builds the keys listed below; scripts.go assembles and loads the
// Lua scripts of scripts/ (one file per script, the parts they share in
// scripts/lib/); codec.go encodes what the scripts store; timeout.go
// bounds every call by Options.CallTimeout and reports it to a
// storage.Health, which logs a server that stops answering once per
// episode; policy.go re-checks the eviction
// policy for Claim; existing.go marks and recognises a prefix that holds a
// store (Options.OpenExisting).
//
// Readiness and lease expiry are judged on one clock: the server's TIME,
// read inside the script that decides, or Options.Now when set (tests).
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
// acknowledged writes whatever the persistence settings are.
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
//	                cases, key, topic and kind each ended by a NUL byte) and
//	                the counter of its buffered events (es)
//	c:<id>          hash: checkpoint key → encoded checkpoint (with its sequence
//	                number and execution) of the current execution
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
//	q:<workflow>    sorted set: runs ready to claim, scored by ReadyAt (µs)
//	l:<workflow>    sorted set: running runs, scored by lease expiry (µs)
//	w:<topic>       set: runs with a case of their wait on the topic
//	ia, iw:<wf>, is:<status>, iws:<status>:<wf>
//	                sorted sets (all scores 0): the listing indexes, read in
//	                lexicographic order
//	cat:w, cat:e    hashes: the catalog, workflow name → encoded
//	                WorkflowType and topic → encoded EventType
//	op:<random>     string, expires after a minute: the reply of one
//	                SendEvent, Emit or Restart call, so that a repeated call
//	                is answered without delivering twice or beginning another
//	                execution
//	v               string: the version of this key layout (1), which marks
//	                the prefix as a Stem store (see Options.OpenExisting)
//	wake            pub/sub channel: runs may be ready (see Notifications)
//	probe           string: the counter ProbeCommits increments, deleted
//	                before it returns
//
// With Redis Cluster every script must find its keys in one slot, so the
// prefix must contain a hash tag, such as "{stem}:"; New refuses a cluster
// client otherwise. All of the store's data then lives on one shard.
//
// go-redis sends a command again when its reply was lost (a read timeout, a
// dropped connection), so a script may run twice. Each is safe to repeat: a
// repeated checkpoint finds its own write and reports it as Existing; a
// repeated Suspend, Complete, ContinueAsNew or Terminate finds the run
// already changed and reports a lost lease or an invalid state; SendEvent,
// Emit and Restart carry an operation ID and a repeat returns the first
// reply, so an event is never buffered or delivered twice and a restart
// begins one execution, not two; a repeated RecordAttempts records its
// attempts twice, which changes no attempt count (the runtime counts by
// attempt number); a repeated CreateRuns reports the runs it had just
// created as existing; a repeated Claim leaves the first reply's runs leased
// to nobody until their lease expires (they are then recovered).
package redisstore
