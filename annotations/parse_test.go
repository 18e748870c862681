package annotations

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"
	"testing"
	"time"
)

// base is the position tests parse at; errors are reported as 1-based
// columns into the line.
const base = token.Pos(1)

func col(p token.Pos) int { return int(p-base) + 1 }

func TestParseGood(t *testing.T) {
	t.Parallel()
	cases := []struct {
		line string
		want Annotation
	}{
		{"//stem:workflow name=orders.fulfil", &Workflow{Name: "orders.fulfil", Version: 1}},
		{"//stem:workflow name=orders.fulfil version=3", &Workflow{Name: "orders.fulfil", Version: 3}},
		{"//stem:workflow   version=2\tname=a_b-C.9  ", &Workflow{Name: "a_b-C.9", Version: 2}},
		{"//stem:workflow name=orders.fulfil timeout=1h30m progress=FulfilProgress",
			&Workflow{Name: "orders.fulfil", Version: 1, Timeout: 90 * time.Minute, Progress: "FulfilProgress"}},
		{"//stem:workflow progress=p name=w", &Workflow{Name: "w", Version: 1, Progress: "p"}},
		{"//stem:workflow name=w queue=orders.slow-2_b retention=720h",
			&Workflow{Name: "w", Version: 1, Queue: "orders.slow-2_b", Retention: 720 * time.Hour}},
		{"//stem:workflow retention=forever name=w queue=default", &Workflow{Name: "w", Version: 1, Queue: "default", RetainForever: true}},
		{"//stem:workflow name=w retention=1ns", &Workflow{Name: "w", Version: 1, Retention: 1}},
		{"//stem:workflow name=w queue=" + strings.Repeat("q", 128), &Workflow{Name: "w", Version: 1, Queue: strings.Repeat("q", 128)}},
		{"//stem:workflow name=w existing=fail ended=reuse-failed", &Workflow{Name: "w", Version: 1, Existing: ExistingFail, Ended: EndedReuseFailed}},
		{"//stem:workflow ended=reject name=w existing=replace", &Workflow{Name: "w", Version: 1, Existing: ExistingReplace, Ended: EndedReject}},
		{"//stem:workflow name=w existing=return", &Workflow{Name: "w", Version: 1, Existing: ExistingReturn}},
		{"//stem:workflow name=w ended=return", &Workflow{Name: "w", Version: 1, Ended: EndedReturn}},
		{"//stem:workflow name=w ended=reuse", &Workflow{Name: "w", Version: 1, Ended: EndedReuse}},
		{"//stem:step name=reserve", &Step{Name: "reserve", Version: 1}},
		{"//stem:step name=reserve retries=5 backoff=200ms..30s timeout=10s",
			&Step{Name: "reserve", Version: 1, Retries: 5, Backoff: 200 * time.Millisecond, MaxBackoff: 30 * time.Second, Timeout: 10 * time.Second}},
		{"//stem:step name=charge version=2 retries=0 backoff=1s", &Step{Name: "charge", Version: 2, Backoff: time.Second}},
		{"//stem:step autoversion name=pack", &Step{Name: "pack", Version: 1, Autoversion: true}},
		{"//stem:step name=pay tx", &Step{Name: "pay", Version: 1, Tx: true}},
		{"//stem:step tx name=pack autoversion retries=3", &Step{Name: "pack", Version: 1, Retries: 3, Autoversion: true, Tx: true}},
		{"//stem:step name=p backoff=1s..1s", &Step{Name: "p", Version: 1, Backoff: time.Second, MaxBackoff: time.Second}},
		{"//stem:step name=p retries=forever backoff=1h jitter=0", &Step{Name: "p", Version: 1, Retries: RetryForever, Backoff: time.Hour, Jitter: NoJitter}},
		{"//stem:step name=p jitter=0.25", &Step{Name: "p", Version: 1, Jitter: 0.25}},
		{"//stem:step name=p jitter=1", &Step{Name: "p", Version: 1, Jitter: 1}},
		{"//stem:event topic=shipment.ready", &Event{Topic: "shipment.ready", Version: 1}},
		{"//stem:event topic=a/b:c", &Event{Topic: "a/b:c", Version: 1}},
		{"//stem:event topic=shipment.ready version=2", &Event{Topic: "shipment.ready", Version: 2}},
		{"//stem:update name=orders.cancel reply=Cancelled", &Update{Name: "orders.cancel", Reply: "Cancelled", Version: 1}},
		{"//stem:update version=2 validate=checkCancel reply=Cancelled name=orders.cancel",
			&Update{Name: "orders.cancel", Reply: "Cancelled", Validate: "checkCancel", Version: 2}},
		{"//stem:update name=a_b-C.9 reply=r validate=_v", &Update{Name: "a_b-C.9", Reply: "r", Validate: "_v", Version: 1}},
		{"//stem:update name=" + strings.Repeat("u", 128) + " reply=R", &Update{Name: strings.Repeat("u", 128), Reply: "R", Version: 1}},
		{"//stem:stream name=orders.log", &Stream{Name: "orders.log", Version: 1}},
		{"//stem:stream version=3 name=orders.log", &Stream{Name: "orders.log", Version: 3}},
		{"//stem:error name=bank.insufficient_funds", &ErrorDecl{Name: "bank.insufficient_funds"}},
		{"//stem:allow time", &Allow{Kinds: []string{"time"}}},
		{"//stem:attr name=customer from=Customer.ID", &Attr{Name: "customer", From: "Customer.ID"}},
		{"//stem:attr name=total type=number", &Attr{Name: "total", Type: "number"}},
		{"//stem:attr from=Placed type=time name=order.placed_at-2", &Attr{Name: "order.placed_at-2", Type: "time", From: "Placed"}},
		{"//stem:attr name=rush type=bool", &Attr{Name: "rush", Type: "bool"}},
		{"//stem:attr name=stage type=string", &Attr{Name: "stage", Type: "string"}},
		{"//stem:attr name=" + strings.Repeat("a", 64) + " from=_x.Y2", &Attr{Name: strings.Repeat("a", 64), From: "_x.Y2"}},
		{"//stem:allow rand goroutine io", &Allow{Kinds: []string{"rand", "goroutine", "io"}}},
	}
	for _, c := range cases {
		got, err := Parse(base, c.line)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.line, err)
			continue
		}
		if !reflect.DeepEqual(stripPositions(got), c.want) {
			t.Errorf("Parse(%q) = %#v, want %#v", c.line, got, c.want)
		}
		again, err := Parse(base, got.String())
		if err != nil || !reflect.DeepEqual(stripPositions(again), c.want) {
			t.Errorf("Parse(%q.String() = %q) = %#v, %v", c.line, got.String(), again, err)
		}
	}
}

func TestParseNotDirective(t *testing.T) {
	t.Parallel()
	for _, line := range []string{
		"// Fulfil reserves stock.",
		"//go:generate go run x",
		"//",
		"// stem:steps are nice",
		"// the stem:step directive",
		"/*stem:step name=x*/",
	} {
		a, err := Parse(base, line)
		if a != nil || err != nil {
			t.Errorf("Parse(%q) = %v, %v; want nil, nil", line, a, err)
		}
		if IsDirective(line) {
			t.Errorf("IsDirective(%q) = true", line)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		line string
		want []string // "col: message substring"
	}{
		{"//stem:stpe name=x", []string{"8: unknown directive //stem:stpe; want //stem:workflow, //stem:attr, //stem:step, //stem:event, //stem:update, //stem:stream, //stem:error or //stem:allow (did you mean //stem:step?)"}},
		{"//stem:eror name=x", []string{"8: unknown directive //stem:eror; want //stem:workflow, //stem:attr, //stem:step, //stem:event, //stem:update, //stem:stream, //stem:error or //stem:allow (did you mean //stem:error?)"}},
		{"//stem:updaet name=x reply=R", []string{"8: unknown directive //stem:updaet; want //stem:workflow, //stem:attr, //stem:step, //stem:event, //stem:update, //stem:stream, //stem:error or //stem:allow (did you mean //stem:update?)"}},
		{"//stem:steam name=x", []string{"8: (did you mean //stem:stream?)"}},
		{"//stem:streams name=x", []string{"8: (did you mean //stem:stream?)"}},
		{"// stem:update name=x reply=R", []string{"4: a directive has no space after //: write //stem:update"}},
		{"// stem:stream name=x", []string{"4: a directive has no space after //: write //stem:stream"}},
		{"//stem:update", []string{"8: //stem:update needs name=<update name>", "8: //stem:update needs reply=<Type>"}},
		{"//stem:update name=x", []string{"8: //stem:update needs reply=<Type>"}},
		{"//stem:update reply=R", []string{"8: //stem:update needs name=<update name>"}},
		{"//stem:update name=x reply=R rpely=S", []string{"30: unknown key \"rpely\" in //stem:update; want name, reply, validate or version (did you mean reply?)"}},
		{"//stem:update name=x reply=R validtae=v", []string{"30: unknown key \"validtae\" in //stem:update; want name, reply, validate or version (did you mean validate?)"}},
		{"//stem:update name=x reply=R validator=v", []string{"30: (did you mean validate?)"}},
		{"//stem:update name=x reply=R versoin=2", []string{"30: (did you mean version?)"}},
		{"//stem:update name=x reply=R topic=t", []string{"30: unknown key \"topic\" in //stem:update; want name, reply, validate or version"}},
		{"//stem:update name=x reply=R reply=S", []string{"30: duplicate key reply in //stem:update"}},
		{"//stem:update name=x reply=pkg.R", []string{"28: reply names a type declared in the update's package, got \"pkg.R\""}},
		{"//stem:update name=x reply=*R", []string{"28: reply names a type"}},
		{"//stem:update name=x reply=R validate=pkg.v", []string{"39: validate names a function declared in the update's package, func(Request) error, got \"pkg.v\""}},
		{"//stem:update name=x reply=R validate", []string{"30: validate needs a value: write validate=<value>"}},
		{"//stem:update name=x reply=R validate=", []string{"39: empty value for validate"}},
		{"//stem:update name=x reply=R version=0", []string{"38: version must be a positive integer"}},
		{"//stem:update name=a@b reply=R", []string{"21: invalid character '@' in update name \"a@b\""}},
		{"//stem:update name=a/b reply=R", []string{"21: invalid character '/' in update name"}},
		{"//stem:update name=" + strings.Repeat("u", 129) + " reply=R", []string{"20: update name is 129 bytes long, at most 128"}},
		{"//stem:stream", []string{"8: //stem:stream needs name=<stream name>"}},
		{"//stem:stream name=x nmae=y", []string{"22: unknown key \"nmae\" in //stem:stream; want name or version (did you mean name?)"}},
		{"//stem:stream name=x verison=2", []string{"22: (did you mean version?)"}},
		{"//stem:stream name=x reply=R", []string{"22: unknown key \"reply\" in //stem:stream; want name or version"}},
		{"//stem:stream name=x version=01", []string{"30: version must be a positive integer"}},
		{"//stem:stream name=x name=y", []string{"22: duplicate key name in //stem:stream"}},
		{"//stem:stream name=a#b", []string{"21: invalid character '#' in stream name \"a#b\""}},
		{"//stem:stream name=a:b", []string{"21: invalid character ':' in stream name"}},
		{"//stem:stream name=", []string{"20: empty value for name"}},
		{"//stem:error", []string{"8: //stem:error needs name=<error name>"}},
		{"//stem:error nmae=x", []string{"8: //stem:error needs name=<error name>", "14: unknown key \"nmae\" in //stem:error; want name (did you mean name?)"}},
		{"//stem:error name=bank.insufficient funds", []string{"37: unknown key \"funds\" in //stem:error; want name"}},
		{"//stem:error name=a@b", []string{"20: invalid character '@' in error name"}},
		{"//stem:allow", []string{"8: //stem:allow needs the kinds of nondeterminism it allows: time, rand, goroutine, select, map, io or global"}},
		{"//stem:allow tmie", []string{"14: unknown key \"tmie\" in //stem:allow; want time, rand, goroutine, select, map, io or global (did you mean time?)"}},
		{"//stem:allow time=now", []string{"18: time is a flag and takes no value: write time"}},
		{"//stem:event topic=x version=0", []string{"30: version must be a positive integer without sign or leading zeros, got \"0\""}},
		{"//stem:workflwo name=x", []string{"8: (did you mean //stem:workflow?)"}},
		{"//stem:atr name=x type=string", []string{"8: unknown directive //stem:atr; want //stem:workflow, //stem:attr, //stem:step, //stem:event, //stem:update, //stem:stream, //stem:error or //stem:allow (did you mean //stem:attr?)"}},
		{"//stem:attrs name=x type=string", []string{"8: (did you mean //stem:attr?)"}},
		{"//stem:attribute name=x type=string", []string{"8: unknown directive //stem:attribute"}},
		{"// stem:attr name=x type=string", []string{"4: a directive has no space after //: write //stem:attr"}},
		{"//stem:attr", []string{"8: //stem:attr needs name=<attribute name>", "8: //stem:attr needs type=<string|number|time|bool>, or from=<field of the input>"}},
		{"//stem:attr name=x", []string{"8: //stem:attr needs type=<string|number|time|bool>, or from=<field of the input> to take the attribute from the input with the field's type"}},
		{"//stem:attr type=string", []string{"8: //stem:attr needs name=<attribute name>"}},
		{"//stem:attr name=x typ=string", []string{"8: //stem:attr needs type=", "20: unknown key \"typ\" in //stem:attr; want name, type or from (did you mean type?)"}},
		{"//stem:attr name=x form=A", []string{"8: //stem:attr needs type=", "20: unknown key \"form\" in //stem:attr; want name, type or from (did you mean from?)"}},
		{"//stem:attr name=x type=int", []string{"25: type must be string, number, time or bool, got \"int\""}},
		{"//stem:attr name=x type=strng", []string{"25: type must be string, number, time or bool, got \"strng\" (did you mean string?)"}},
		{"//stem:attr name=x type=String", []string{"25: (did you mean string?)"}},
		{"//stem:attr name=x type=", []string{"25: empty value for type"}},
		{"//stem:attr name=x type=bool type=bool", []string{"30: duplicate key type in //stem:attr"}},
		{"//stem:attr name=a@b type=bool", []string{"19: invalid character '@' in attribute name \"a@b\""}},
		{"//stem:attr name=a/b type=bool", []string{"19: invalid character '/' in attribute name"}},
		{"//stem:attr name=" + strings.Repeat("a", 65) + " type=bool", []string{"18: attribute name is 65 bytes long, at most 64"}},
		{"//stem:attr name=x from=Customer.", []string{"34: from names a field of the workflow's input by its Go path, such as Customer.ID; \"\" is not a Go identifier"}},
		{"//stem:attr name=x from=.ID", []string{"25: \"\" is not a Go identifier"}},
		{"//stem:attr name=x from=Customer.1D", []string{"34: \"1D\" is not a Go identifier"}},
		{"//stem:attr name=x from=customer[0]", []string{"25: \"customer[0]\" is not a Go identifier"}},
		{"//stem:attr name=x from=Customer->ID", []string{"25: \"Customer->ID\" is not a Go identifier"}},
		{"//stem:frobnicate", []string{"8: unknown directive //stem:frobnicate"}},
		{"//stem:", []string{"8: malformed directive"}},
		{"//stem:Step name=x", []string{"8: malformed directive"}},
		{"// stem:step name=x", []string{"4: a directive has no space after //: write //stem:step"}},
		{"//\tstem:event topic=x", []string{"4: a directive has no space after //: write //stem:event"}},
		{"//stem:step", []string{"8: //stem:step needs name=<step name>"}},
		{"//stem:workflow version=2", []string{"8: //stem:workflow needs name=<workflow name>"}},
		{"//stem:event", []string{"8: //stem:event needs topic=<topic>"}},
		{"//stem:workflow name=a timeout=10", []string{"32: bad duration \"10\" for timeout"}},
		{"//stem:workflow name=a timeout=0s", []string{"32: timeout must be positive, got 0s"}},
		{"//stem:workflow name=a timeout=-1h", []string{"32: timeout must be positive, got -1h"}},
		{"//stem:workflow name=a progress=pkg.P", []string{"33: progress names a type declared in the workflow's package, got \"pkg.P\""}},
		{"//stem:workflow name=a progress=[]P", []string{"33: progress names a type"}},
		{"//stem:workflow name=a progres=P", []string{"24: unknown key \"progres\" in //stem:workflow; want name, version, timeout, progress, queue, retention, existing or ended (did you mean progress?)"}},
		{"//stem:workflow name=a timout=1s", []string{"24: (did you mean timeout?)"}},
		{"//stem:workflow name=a progress", []string{"24: progress needs a value: write progress=<value>"}},
		{"//stem:workflow name=a queu=q", []string{"24: unknown key \"queu\" in //stem:workflow; want name, version, timeout, progress, queue, retention, existing or ended (did you mean queue?)"}},
		{"//stem:workflow name=a queues=q", []string{"24: (did you mean queue?)"}},
		{"//stem:workflow name=a retentoin=1h", []string{"24: unknown key \"retentoin\" in //stem:workflow; want name, version, timeout, progress, queue, retention, existing or ended (did you mean retention?)"}},
		{"//stem:workflow name=a retension=forever", []string{"24: (did you mean retention?)"}},
		{"//stem:workflow name=a queue=", []string{"30: empty value for queue"}},
		{"//stem:workflow name=a queue", []string{"24: queue needs a value: write queue=<value>"}},
		{"//stem:workflow name=a queue=q queue=r", []string{"32: duplicate key queue in //stem:workflow"}},
		{"//stem:workflow name=a queue=or@ders", []string{"32: invalid character '@' in queue name \"or@ders\": use ASCII letters, digits, '.', '_' and '-'"}},
		{"//stem:workflow name=a queue=a/b", []string{"31: invalid character '/' in queue name"}},
		{"//stem:workflow name=a queue=\"q\"", []string{"30: invalid character '\"' in queue name"}},
		{"//stem:workflow name=a queue=" + strings.Repeat("q", 129), []string{"30: queue name is 129 bytes long, at most 128"}},
		{"//stem:workflow name=a retention=-1h", []string{"34: retention must be positive or forever, got -1h"}},
		{"//stem:workflow name=a retention=0s", []string{"34: retention 0s would keep finished runs forever: write retention=forever to say so"}},
		{"//stem:workflow name=a retention=0", []string{"34: retention 0 would keep finished runs forever"}},
		{"//stem:workflow name=a retention=soon", []string{"34: bad duration \"soon\" for retention: want a Go duration such as 168h or 720h, or forever"}},
		{"//stem:workflow name=a retention=30d", []string{"34: bad duration \"30d\" for retention: want a Go duration such as 168h or 720h, or forever (Go durations have no days: write 720h for 30d)"}},
		{"//stem:workflow name=a retention=Forever", []string{"34: bad duration \"Forever\" for retention: want a Go duration such as 168h or 720h, or forever (did you mean forever?)"}},
		{"//stem:workflow name=a retention=forever retention=1h", []string{"42: duplicate key retention"}},
		{"//stem:workflow name=a queue=a:b retention=-5m queu=x", []string{
			"31: invalid character ':' in queue name", "44: retention must be positive", "48: unknown key \"queu\""}},
		{"//stem:workflow name=a existing=replce", []string{"33: existing must be return, fail or replace, got \"replce\" (did you mean replace?)"}},
		{"//stem:workflow name=a existing=reuse", []string{"33: existing must be return, fail or replace, got \"reuse\""}},
		{"//stem:workflow name=a existing=Fail", []string{"33: existing must be return, fail or replace, got \"Fail\" (did you mean fail?)"}},
		{"//stem:workflow name=a ended=reuse_failed", []string{"30: ended must be return, reuse, reject or reuse-failed, got \"reuse_failed\" (did you mean reuse-failed?)"}},
		{"//stem:workflow name=a ended=fail", []string{"30: ended must be return, reuse, reject or reuse-failed, got \"fail\""}},
		{"//stem:workflow name=a ended=", []string{"30: empty value for ended"}},
		{"//stem:workflow name=a existing", []string{"24: existing needs a value: write existing=<value>"}},
		{"//stem:workflow name=a existing=fail existing=replace", []string{"38: duplicate key existing in //stem:workflow"}},
		{"//stem:workflow name=a exisitng=fail", []string{"24: unknown key \"exisitng\" in //stem:workflow; want name, version, timeout, progress, queue, retention, existing or ended (did you mean existing?)"}},
		{"//stem:workflow name=a ende=reuse", []string{"24: (did you mean ended?)"}},
		{"//stem:step name=a tx=pgx", []string{"22: tx is a flag and takes no value: write tx"}},
		{"//stem:step name=a tx tx", []string{"23: duplicate key tx in //stem:step"}},
		{"//stem:step name=a txn", []string{"20: unknown key \"txn\" in //stem:step; want name, version, retries, backoff, jitter, timeout, autoversion or tx (did you mean tx?)"}},
		{"//stem:step name=a nmae=b", []string{"20: unknown key \"nmae\" in //stem:step; want name, version, retries, backoff, jitter, timeout, autoversion or tx (did you mean name?)"}},
		{"//stem:step name=a name=b", []string{"20: duplicate key name in //stem:step"}},
		{"//stem:step name=a retries=-1", []string{"28: retries must not be negative, got -1"}},
		{"//stem:step name=a retries=x", []string{"28: retries must be a non-negative integer"}},
		{"//stem:step name=a retries=01", []string{"28: retries must be a non-negative integer"}},
		{"//stem:step name=a retries=Forever", []string{"28: retries must be a non-negative integer without sign or leading zeros, or forever"}},
		{"//stem:step name=a jitter=1.5", []string{"27: jitter must be a decimal from 0 to 1"}},
		{"//stem:step name=a jitter=-0.1", []string{"27: jitter must be a decimal from 0 to 1"}},
		{"//stem:step name=a jitter=NaN", []string{"27: jitter must be a decimal from 0 to 1"}},
		{"//stem:step name=a version=0", []string{"28: version must be a positive integer"}},
		{"//stem:step name=a version=+2", []string{"28: version must be a positive integer"}},
		{"//stem:step name=a timeout=10", []string{"28: bad duration \"10\" for timeout"}},
		{"//stem:step name=a timeout=-1s", []string{"28: timeout must be positive, got -1s"}},
		{"//stem:step name=a timeout=0s", []string{"28: timeout must be positive"}},
		{"//stem:step name=a backoff=1s..x", []string{"32: bad duration \"x\" for backoff maximum"}},
		{"//stem:step name=a backoff=2s..1s", []string{"32: backoff maximum 1s is less than its start 2s"}},
		{"//stem:step name=a backoff=..1s", []string{"28: bad duration \"\" for backoff"}},
		{"//stem:step name=a autoversion=true", []string{"31: autoversion is a flag and takes no value"}},
		{"//stem:step name=a retries", []string{"20: retries needs a value: write retries=<value>"}},
		{"//stem:step name=", []string{"18: empty value for name"}},
		{"//stem:step name=a@v2", []string{"19: invalid character '@' in step name \"a@v2\""}},
		{"//stem:step name=a#b", []string{"19: invalid character '#'"}},
		{"//stem:step name=a/b", []string{"19: invalid character '/'"}},
		{"//stem:workflow name=ü", []string{"22: invalid character"}},
		{"//stem:step name=" + strings.Repeat("x", 129), []string{"18: step name is 129 bytes long, at most 128"}},
		{"//stem:step name=" + strings.Repeat("x", 126), []string{"18: step key is 129 bytes long, at most 128"}},
		{"//stem:workflow name=a\x01", []string{"23: invalid character '\\x01' in workflow name"}},
		{"//stem:event topic=stem.child/x", []string{"20: event topic \"stem.child/x\": topics starting with \"stem.\" are reserved"}},
		{"//stem:event topic=a@b", []string{"21: invalid character '@' in event topic"}},
		{"//stem:event topic=\"x\"", []string{"20: invalid character '\"' in event topic"}},
		{"//stem:event topic=x \"y", []string{"14: malformed arguments"}},
		{"//stem:event \"topic=x\"", []string{"8: //stem:event needs topic", "14: quoted arguments are not supported"}},
		{"//stem:step name=a retries=-1 timeout=x nope", []string{
			"28: retries must not be negative", "39: bad duration", "41: unknown key \"nope\""}},
	}
	for _, c := range cases {
		_, err := Parse(base, c.line)
		var list ErrorList
		if !errors.As(err, &list) {
			t.Errorf("Parse(%q) error = %v, want an ErrorList", c.line, err)
			continue
		}
		var got []string
		for _, e := range list {
			got = append(got, fmt.Sprintf("%d: %s", col(e.Pos), e.Msg))
		}
		if len(got) != len(c.want) {
			t.Errorf("Parse(%q) errors:\n\t%s\nwant:\n\t%s", c.line, strings.Join(got, "\n\t"), strings.Join(c.want, "\n\t"))
			continue
		}
		for i := range got {
			wcol, wmsg, _ := strings.Cut(c.want[i], ": ")
			gcol, gmsg, _ := strings.Cut(got[i], ": ")
			if gcol != wcol || !strings.Contains(gmsg, wmsg) {
				t.Errorf("Parse(%q) error %d = %q, want %q", c.line, i, got[i], c.want[i])
			}
		}
	}
}

func TestParseKeepsPositions(t *testing.T) {
	t.Parallel()
	a, err := Parse(base, "//stem:step name=reserve  retries=5 autoversion")
	if err != nil {
		t.Fatal(err)
	}
	s := a.(*Step)
	if col(s.Pos()) != 1 || col(s.KeyPos("name")) != 13 || col(s.ValuePos("name")) != 18 ||
		col(s.KeyPos("retries")) != 27 || col(s.KeyPos("autoversion")) != 37 || col(s.KeyPos("timeout")) != 1 {
		t.Errorf("positions: %+v", s.Positions)
	}
	if s.Key() != "reserve@v1" {
		t.Errorf("Key() = %q", s.Key())
	}
}

// TestParseComment parses the directives of a real file, whose positions
// come from the file set.
func TestParseComment(t *testing.T) {
	t.Parallel()
	src := "package p\n\n// F does things.\n//\n//stem:workflow name=p.f  versoin=2\nfunc F() {}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Decls[0].(*ast.FuncDecl).Doc
	var got []string
	for _, c := range doc.List {
		_, err := ParseComment(c)
		var list ErrorList
		if errors.As(err, &list) {
			for _, e := range list {
				got = append(got, fmt.Sprintf("%s: %s", fset.Position(e.Pos), e.Msg))
			}
		}
	}
	want := []string{`p.go:5:27: unknown key "versoin" in //stem:workflow; want name, version, timeout, progress, queue, retention, existing or ended (did you mean version?)`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if strings.Contains(doc.Text(), "stem:") {
		t.Errorf("doc text keeps the directive: %q", doc.Text())
	}
}

func TestErrorList(t *testing.T) {
	t.Parallel()
	l := ErrorList{{Msg: "a"}, {Msg: "b"}}
	if l.Error() != "a (and 1 more errors)" || l[:1].Error() != "a" {
		t.Errorf("Error() = %q", l.Error())
	}
}

// stripPositions returns a copy of a without positions, for comparison.
func stripPositions(a Annotation) Annotation {
	switch a := a.(type) {
	case *Workflow:
		c := *a
		c.Positions = Positions{}
		return &c
	case *Step:
		c := *a
		c.Positions = Positions{}
		return &c
	case *Event:
		c := *a
		c.Positions = Positions{}
		return &c
	case *Update:
		c := *a
		c.Positions = Positions{}
		return &c
	case *Stream:
		c := *a
		c.Positions = Positions{}
		return &c
	case *Allow:
		c := *a
		c.Positions = Positions{}
		return &c
	case *ErrorDecl:
		c := *a
		c.Positions = Positions{}
		return &c
	case *Attr:
		c := *a
		c.Positions = Positions{}
		return &c
	}
	return a
}
