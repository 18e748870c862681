// Command stem inspects and controls workflow runs in any Stem store.
//
//	stem [--store URL] runs [--workflow NAME] [--status STATUS] [--limit N] [--after ID]
//	stem [--store URL] show RUN_ID
//	stem [--store URL] pause|resume|restart RUN_ID
//	stem [--store URL] terminate RUN_ID [REASON]
//	stem [--store URL] send RUN_ID TOPIC JSON
//	stem [--store URL] emit TOPIC JSON
//
// The store is a SQLite path (default stem.db, or $STEM_STORE), a
// postgres:// or redis:// URL; see package storeurl. Add --json for
// machine-readable output.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
