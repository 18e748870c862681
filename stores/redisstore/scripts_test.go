package redisstore

import (
	"context"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stemflow/stem/storage"
)

func TestAssemble(t *testing.T) {
	t.Parallel()
	src := assemble("local function main() return send('a', 'b', 'c') end")
	for _, want := range []string{"function send(", "function deliver(", "function write_cp(", "function put_cp(", "function evkey(", "function f(", "local NOW"} {
		if !strings.Contains(src, want) {
			t.Errorf("script calling send lacks %q", want)
		}
	}
	for _, unwanted := range []string{"function fence(", "function finish(", "function extend("} {
		if strings.Contains(src, unwanted) {
			t.Errorf("script calling send includes %q", unwanted)
		}
	}
	if !strings.HasPrefix(src, "#!lua\n") {
		t.Error("script lacks its shebang")
	}
	if src := assemble("local function main() return redis.call('GET', KEYS[1]) end"); strings.Contains(src, "TIME") || strings.Contains(src, "function") && strings.Count(src, "function") != 1 {
		t.Errorf("a script using no helper got some:\n%s", src)
	}
	if callsHelper("local x = self(1)", "f") || !callsHelper("x = f(1)", "f") || !callsHelper("f(1)", "f") {
		t.Error("callsHelper matches inside identifiers")
	}
}

// TestScriptFiles: every file under scripts/ starts with a comment, a
// script's comment says what it reads of KEYS and ARGV and what it
// replies, and each file of scripts/ is exactly one of the scripts New
// loads.
func TestScriptFiles(t *testing.T) {
	t.Parallel()
	loaded := make(map[string]bool)
	for _, sc := range allScripts {
		loaded[sc.Hash()] = true
	}
	if len(loaded) != len(allScripts) {
		t.Fatalf("%d scripts with %d distinct texts", len(allScripts), len(loaded))
	}
	var scripts int
	err := fs.WalkDir(luaFiles, "scripts", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := luaFiles.ReadFile(path)
		if err != nil {
			return err
		}
		src := string(b)
		if bang, rest, _ := strings.Cut(src, "\n"); strings.HasPrefix(bang, "#!") {
			if strings.HasPrefix(path, "scripts/lib/") || bang != "#!lua flags=no-writes" && bang != "#!lua flags=allow-oom" {
				t.Errorf("%s starts with %q; only a script may have a shebang of its own, #!lua flags=no-writes or #!lua flags=allow-oom", path, bang)
			}
			src = rest
		}
		if !strings.HasPrefix(src, "-- ") {
			t.Errorf("%s does not start with a comment", path)
		}
		if strings.Contains(src, "--[[") {
			t.Errorf("%s has a block comment, which code() does not strip", path)
		}
		lead, _, _ := strings.Cut(src, "local function main()")
		if strings.HasPrefix(path, "scripts/lib/") {
			if !strings.Contains(src, "KEYS") && !strings.Contains(src, "ARGV") {
				t.Errorf("%s does not say what it reads of KEYS and ARGV", path)
			}
			return nil
		}
		scripts++
		for _, want := range []string{"KEYS", "ARGV[1]", "Reply:"} {
			if !strings.Contains(lead, want) {
				t.Errorf("%s: its leading comment does not mention %s", path, want)
			}
		}
		if !loaded[redis.NewScript(assemble(string(b))).Hash()] {
			t.Errorf("%s is not one of the scripts New loads", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scripts != len(allScripts) {
		t.Errorf("%d script files for %d scripts", scripts, len(allScripts))
	}
	var names []string
	for _, h := range helpers {
		if slices.Contains(names, h.name) {
			t.Errorf("helper %s is defined twice", h.name)
		}
		names = append(names, h.name)
	}
}

// TestScriptKeys: the key helpers of scripts/lib/keys.lua build the same
// keys as keyspace, the layout's definition in Go, and every key starts
// with the prefix.
func TestScriptKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, nil)
	k := s.keys
	const id, topic, wf = "rün:1", "to:pic", "w:f"
	want := map[string]string{
		"rkey('" + id + "')":                               k.run(id),
		"ckey('" + id + "')":                               k.checkpoints(id),
		"evkey('" + id + "', '" + topic + "')":             k.events(id, topic),
		"readyq('" + wf + "')":                             k.ready(wf),
		"leaseq('" + wf + "')":                             k.leases(wf),
		"waitset('" + topic + "')":                         k.waiting(topic),
		"idx_all()":                                        k.indexAll(),
		"idx_wf('" + wf + "')":                             k.indexWorkflow(wf),
		"idx_st('queued')":                                 k.indexStatus("queued"),
		"idx_wf_st('queued', '" + wf + "')":                k.indexWorkflowStatus("queued", wf),
		"opkey('op')":                                      k.op("op"),
		"xkey('" + id + "')":                               k.executions(id),
		"cxkey(12, '" + id + "')":                          k.pastCheckpoints(12, id),
		"axkey(12, '" + id + "')":                          k.pastAttempts(12, id),
		"chkey('" + id + "')":                              k.children(id),
		"cat_wf()":                                         k.catalogWorkflows(),
		"cat_ev()":                                         k.catalogEvents(),
		"wake_channel()":                                   k.wake(),
		"akey('" + id + "')":                               k.attempts(id),
		"cat_q()":                                          k.catalogQueues(),
		"evtopics('" + id + "')":                           k.eventTopics(id),
		"readyq('" + wf + "', lane('q', '3'))":             k.laneReady(wf, "q", 3, 0),
		"leaseq('" + wf + "', lane('default', '-2'))":      k.laneLeases(wf, "default", -2, 0),
		"readyq('" + wf + "', lane('q', '0'))":             k.laneReady(wf, "q", 0, 0),
		"leaseq('" + wf + "', lane(nil, nil))":             k.laneLeases(wf, "", 0, 0),
		"readyq('" + wf + "', lane(nil, nil, '0'))":        k.laneReady(wf, "", 0, 0),
		"readyq('" + wf + "', lane(nil, nil, '7'))":        k.laneReady(wf, "", 0, 7),
		"leaseq('" + wf + "', lane('q', '-2', '7'))":       k.laneLeases(wf, "q", -2, 7),
		"readyq('" + wf + "', lane('default', '0', '12'))": k.laneReady(wf, "default", 0, 12),
		"levelset('q', '" + wf + "')":                      k.levels("q", wf),
		"versionset('q', '" + wf + "')":                    k.versions("q", wf),
		"queuedq('q')":                                     k.queued("q"),
		"partset('q', 'p:1')":                              k.partition("q", "p:1"),
		"queue_names()":                                    k.queueNames(),
		"rated_queues()":                                   k.ratedQueues(),
		"startsq('q')":                                     k.starts("q"),
		"idx_q('q')":                                       k.indexQueue("q"),
		"idx_q_st('queued', 'q')":                          k.indexQueueStatus("queued", "q"),
		"fin_st('complete')":                               k.finished("complete"),
		"fin_wf_st('complete', '" + wf + "')":              k.finishedWorkflow("complete", wf),
		"schedkey('s1')":                                   k.schedule("s1"),
		"sched_due()":                                      k.schedulesDue(),
		"sched_ids()":                                      k.scheduleIDs(),
		"ended_channel()":                                  k.ended(),
		"channel_prefix()":                                 channelPrefix(k.prefix),
		"startkey('" + wf + "', 'k:1')":                    k.startKey(wf, "k:1"),
		"tokkey('" + id + "')":                             k.keptToken(id),
		"upkey('" + id + "')":                              k.updates(id),
		"urkey('" + id + "')":                              k.replies(id),
		"ulkey('" + id + "')":                              k.updateOrder(id),
		"svkey('" + id + "', 'st.re-am_1')":                k.streamValues(id, "st.re-am_1"),
		"smkey('" + id + "')":                              k.streams(id),
		"idx_created()":                                    k.indexCreated(),
		"idx_wf_created('" + wf + "')":                     k.indexWorkflowCreated(wf),
		"attr_eq('cust.id', 's', 'C:7 x')":                 k.attrEqual(storage.StringAttr("cust.id", "C:7 x")),
		"attr_eq('total', 'n', '1e+06')":                   k.attrEqual(storage.NumberAttr("total", 1e6)),
		"attr_num('total')":                                k.attrNumbers("total"),
		"attr_time('placed')":                              k.attrTimes("placed"),
		"attr_str('cust.id')":                              k.attrStrings("cust.id"),
	}
	var calls []string
	for call := range want {
		calls = append(calls, call)
	}
	slices.Sort(calls)
	for _, h := range loadHelpers("keys") {
		if !slices.ContainsFunc(calls, func(call string) bool { return strings.HasPrefix(call, h.name+"(") }) {
			t.Errorf("key helper %s is not checked against keyspace", h.name)
		}
	}
	src := assemble("local function main() return {" + strings.Join(calls, ", ") + "} end")
	v, err := c.Eval(ctx, src, nil, k.prefix, "").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != len(calls) {
		t.Fatalf("got %d keys for %d calls: %q", len(v), len(calls), v)
	}
	for i, call := range calls {
		if v[i] != want[call] {
			t.Errorf("Lua %s = %q, Go builds %q", call, v[i], want[call])
		}
		if !strings.HasPrefix(v[i], k.prefix) {
			t.Errorf("Lua %s = %q lacks the prefix", call, v[i])
		}
	}
}

// TestReadOnlyScripts: the scripts behind the read methods (GetRun reads
// with HGETALL) are declared no-writes, so a server out of memory under
// noeviction still runs them, and no other script is.
func TestReadOnlyScripts(t *testing.T) {
	t.Parallel()
	reads := map[*redis.Script]bool{listScript: true, countScript: true, stepsScript: true, executionsScript: true, getCatalogScript: true, nextWakeScript: true, queueStatsScript: true, schedListScript: true,
		updatesScript: true, streamScript: true, streamsScript: true, findScript: true}
	for _, sc := range allScripts {
		text := redis.NewScript(assemble(readLua(scriptNames[sc] + ".lua")))
		if text.Hash() != sc.Hash() {
			t.Fatalf("%s: assembled twice differently", scriptNames[sc])
		}
		bang, _, _ := strings.Cut(assemble(readLua(scriptNames[sc]+".lua")), "\n")
		if want := reads[sc]; readOnly(bang) != want {
			t.Errorf("%s: shebang %q, want no-writes %v", scriptNames[sc], bang, want)
		}
	}
}

// TestScriptWaitCases: wait_also (scripts/lib/util.lua) splits what
// encodeAlso writes into the cases decodeAlso reads back, kinds as given.
func TestScriptWaitCases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, nil)
	cases := []storage.WaitCase{
		{Key: "b@v1", Topic: "b", Kind: storage.KindEvent},
		{Key: "c@v1", Topic: "c"},
		{Key: "kid/result", Topic: storage.ReservedTopicPrefix + "child/p/kid\nx", Kind: storage.KindChild},
	}
	enc := encodeAlso(cases)
	if got, err := decodeAlso(enc); err != nil || !reflect.DeepEqual(got, cases) {
		t.Fatalf("decodeAlso(encodeAlso) = %+v, %v; want %+v", got, err, cases)
	}
	src := assemble(`local function main()
  local out = {}
  for _, cs in ipairs(wait_also(ARGV[3])) do
    out[#out + 1] = cs[1]; out[#out + 1] = cs[2]; out[#out + 1] = cs[3]
  end
  return out
end`)
	v, err := c.Eval(ctx, src, nil, s.keys.prefix, "", enc).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	var got []storage.WaitCase
	for i := 0; i+2 < len(v); i += 3 {
		got = append(got, storage.WaitCase{Key: v[i], Topic: v[i+1], Kind: storage.CheckpointKind(v[i+2])})
	}
	if len(v)%3 != 0 || !reflect.DeepEqual(got, cases) {
		t.Fatalf("Lua wait_also = %q, want %+v", v, cases)
	}
	if got, err := decodeAlso(""); err != nil || got != nil {
		t.Fatalf("decodeAlso(\"\") = %+v, %v; want nil", got, err)
	}
	if _, err := decodeAlso("a\x00b"); err == nil {
		t.Fatal("decodeAlso of a cut encoding: no error")
	}
}

// TestScriptAttrs: attrs_merge and attrs_encode (scripts/lib/attrs.lua)
// read what encodeAttrs writes and write what decodeAttrs reads: a merge
// replaces a value and its type, keeps the others and adds new names, as
// storage.MergeAttrs does, and refuses one over the limit.
func TestScriptAttrs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := newTestStore(t, nil)
	at := time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC)
	have := []storage.Attr{storage.StringAttr("s", "a\nb c"), storage.NumberAttr("n", 1.0/3), storage.TimeAttr("t", at),
		storage.BoolAttr("b", false), storage.NumberAttr("big", 1<<60+1)}
	set := []storage.Attr{storage.NumberAttr("s", -2e-300), storage.BoolAttr("b", true), storage.StringAttr("new", "")}
	src := assemble(`local function main()
  local have, changes = attrs_merge(ARGV[3], ARGV[4], tonumber(ARGV[5]))
  if not have then return {'OVER', changes} end
  return {attrs_encode(have), #changes}
end`)
	v, err := c.Eval(ctx, src, nil, s.keys.prefix, "", encodeAttrs(have), encodeAttrs(set), 32).Slice()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeAttrs(str(v[0]))
	want, merr := storage.MergeAttrs(storage.NormalizeAttrs(have), set)
	if err != nil || merr != nil || !slices.EqualFunc(got, want, storage.Attr.Equal) || v[1] != int64(3) {
		t.Fatalf("Lua merge = %+v (%v changes), %v; want %+v (%v)", got, v[1], err, want, merr)
	}
	if v, err := c.Eval(ctx, src, nil, s.keys.prefix, "", encodeAttrs(have), encodeAttrs(set), 5).Slice(); err != nil || v[0] != "OVER" || v[1] != int64(6) {
		t.Fatalf("Lua merge over 5 = %v, %v; want OVER 6", v, err)
	}
}
