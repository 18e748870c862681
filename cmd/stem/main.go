// Command stem inspects and controls the workflow runs in a Stem store.
//
//	stem [flags] runs [--workflow NAME] [--version N,...] [--status STATUS] [--queue NAME] [--where NAME OP VALUE]...
//	                 [--id-prefix PREFIX] [--created-from TIME] [--created-to TIME] [--top-level] [--parent RUN_ID]
//	                 [--held] [--sort created|id] [--limit N] [--after CURSOR]
//	stem [flags] show RUN_ID [--execution N] [--follow]
//	stem [flags] start WORKFLOW JSON [--id RUN_ID] [--queue NAME] [--partition KEY] [--priority N] [--delay DUR]
//	stem [flags] send RUN_ID TOPIC JSON
//	stem [flags] emit TOPIC JSON
//	stem [flags] update RUN_ID UPDATE JSON [--id UPDATE_ID] [--unvalidated] [--no-wait] [--timeout DUR]
//	stem [flags] stream RUN_ID STREAM [--from N] [--follow]
//	stem [flags] pause|resume RUN_ID
//	stem [flags] restart RUN_ID [--from STEP_KEY]
//	stem [flags] terminate RUN_ID [REASON]
//	stem [flags] bulk terminate|cancel|pause|resume|restart|restart-failed [filters as for runs]
//	                 [--dry-run] [--yes] [--rate N] [--reason TEXT]
//	stem [flags] bulk status|continue ID
//	stem [flags] bulk list [--limit N]
//	stem [flags] schedule create ID WORKFLOW CRON JSON [--tz ZONE] [--overlap skip|buffer_one|allow]
//	                 [--catch-up skip|latest|all] [--catch-up-window DUR] [--queue NAME]
//	                 [--partition KEY] [--priority N] [--paused]
//	stem [flags] schedule list [--limit N] [--after ID]   (also: stem schedules)
//	stem [flags] schedule show|pause|resume|trigger|delete ID
//	stem [flags] purge --older-than DUR [--status STATUS,...] [--workflow NAME,...] [--dry-run]
//	stem [flags] queues
//	stem [flags] workflows              (also: stem catalog)
//	stem [flags] ui [--addr HOST:PORT] [--allowed-host NAME] [--read-only]
//	stem [flags] check [--workflow NAME,...] [PATH...]
//	stem [flags] init
//	stem help [COMMAND]                 (also: stem COMMAND --help)
//
// The flags, before or after the command:
//
//	--store URL            a SQLite path (default stem.db, or $STEM_STORE), or a
//	                       postgres://, redis:// or redis+cluster:// URL; see
//	                       package storeurl
//	--json                 print JSON, with snake_case names throughout; an
//	                       action on a run prints run_id, action (what it
//	                       did in a word), message and the run after it
//	--codec-key KEY        the AES key (hex or base64; 16, 24 or 32 bytes) the
//	                       workers seal payloads with, or $STEM_CODEC_KEY;
//	                       several, newest first, while keys rotate (repeat
//	                       the flag or separate them with commas)
//	--codec-key-file PATH  read the keys from a file, one a line, newest first
//
// No command but init creates, migrates or converts a store: a SQLite path
// that names no file is refused with "no Stem store at PATH", and so is
// another application's database, a Postgres schema or Redis prefix that
// holds no Stem store, and a store at a schema version other than this
// program's; each is left exactly as it was. runs, show, stream, workflows,
// queues, check, schedule list and schedule show open the store read-only.
// stem init creates the store, or migrates it to this program's schema,
// and says which it did. start, send, emit and update check the workflow,
// topic or update and JSON against what the workers recorded in the store
// (stem workflows lists it) and write nothing when they do not match; so
// does schedule create, which also checks the cron expression, time zone
// and policies first. Schedules fire only in workers that run the schedule
// package's Service.
//
// stem check reads the stem.manifest.json files of a build under each PATH
// (default ".") and lists the runs in flight in the store that the build
// could not continue: for CI before a deploy (see package check).
//
// Exit status: 0 done; 1 the command failed (one line on stderr, naming
// the run and the store), or the workflow replied to stem update with an
// error; 2 it was called wrongly (with the command's
// usage), or given input it cannot use (a manifest missing or malformed:
// one line naming the file; a JSON argument that does not parse or a
// @FILE that cannot be read: one line saying which, and one pointing to
// the command's -h), and nothing was opened; 3 stem check found
// runs in flight the build could not continue; 4 stem check could not
// judge (stale generated code, or runs it could not replay).
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
