package storeurl_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stemflow/stem/internal/testserver"
	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/redisstore"
	"github.com/stemflow/stem/stores/storeurl"
)

// TestRedisClusterURL: a redis+cluster:// URL opens a Cluster store with
// the shards and prefix it names; Init creates it and then finds it
// current; a tool's OpenExisting of another prefix is refused; a
// misspelled parameter is named with the one meant.
func TestRedisClusterURL(t *testing.T) {
	rc := testserver.RedisCluster(t)
	ctx := context.Background()
	u := rc.URL() + "?shards=4&stem_prefix=urltest:"
	rep, err := storeurl.Init(ctx, u, storeurl.Options{})
	if err != nil || rep.From != 0 {
		t.Fatalf("Init = %+v, %v; want a store created", rep, err)
	}
	if rep, err = storeurl.Init(ctx, u, storeurl.Options{}); err != nil || rep.From != rep.To {
		t.Fatalf("Init again = %+v, %v; want it current", rep, err)
	}
	st, err := storeurl.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, ok := st.(*redisstore.Cluster)
	if !ok || c.Shards() != 4 || !strings.HasPrefix(c.ShardPrefixes()[0], "urltest:{") {
		t.Fatalf("opened %T (%v)", st, st)
	}
	if _, err := st.CreateRuns(ctx, []storage.NewRun{{ID: "r", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	_, err = storeurl.OpenWith(ctx, rc.URL()+"?stem_prefix=other:", storeurl.Options{OpenExisting: true})
	if !errors.Is(err, storage.ErrNotStore) {
		t.Fatalf("OpenExisting of an empty prefix: %v", err)
	}
	_, err = storeurl.Open(ctx, rc.URL()+"?shard=4&stem_prefix=urltest:")
	if err == nil || !strings.Contains(err.Error(), "did you mean shards?") {
		t.Fatalf("a misspelled shards: %v", err)
	}
}
