package storeurl_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stemflow/stem/internal/testserver"
	"github.com/stemflow/stem/stores/pgstore"
	"github.com/stemflow/stem/stores/storeurl"
)

// A Postgres URL through a transaction pooler (a private PgBouncer in
// transaction mode) with stem_pooler=transaction and stem_listen_url is
// created by Init and opened in pooler mode, its statements prepared on
// no server connection; without stem_pooler the store is refused, naming
// the parameter.
func TestPostgresPooler(t *testing.T) {
	direct := os.Getenv("STEM_TEST_POSTGRES_URL")
	if direct == "" {
		t.Skip("STEM_TEST_POSTGRES_URL not set: skipping the Postgres pooler form")
	}
	ctx := context.Background()
	b := testserver.PgBouncer(t, direct)
	schema := fmt.Sprintf("stem_storeurl_pooler_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, direct)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Error(err)
		}
	})
	pooled := b.URL() + "&stem_schema=" + schema + "&stem_pooler=transaction&stem_listen_url=" + url.QueryEscape(direct)
	r, err := storeurl.Init(ctx, pooled, storeurl.Options{DialTimeout: 5 * time.Second})
	if err != nil || r.From != 0 || r.To == 0 {
		t.Fatalf("Init through the pooler: %+v, %v", r, err)
	}
	st, err := storeurl.OpenWith(ctx, pooled, storeurl.Options{OpenExisting: true})
	if err != nil {
		t.Fatalf("OpenWith through the pooler: %v", err)
	}
	mode := st.(*pgstore.Store).Pool().Config().ConnConfig.DefaultQueryExecMode
	st.Close()
	if mode != pgx.QueryExecModeCacheDescribe {
		t.Fatalf("the store through the pooler sends its statements in mode %v, want %v", mode, pgx.QueryExecModeCacheDescribe)
	}
	if st, err := storeurl.Open(ctx, b.URL()+"&stem_schema="+schema); err == nil || !strings.Contains(err.Error(), "stem_pooler=transaction") {
		if err == nil {
			st.Close()
		}
		t.Fatalf("Open through the pooler without stem_pooler: %v, want a refusal naming stem_pooler=transaction", err)
	}
}
