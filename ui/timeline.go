package ui

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stemflow/stem/runtime"
)

// The run page's timeline. A run's executions share one axis, from the
// first one's start to the last one's end (or now); the durable calls of
// the execution shown have an axis of their own, from its start to its
// end (or now, while it goes on), with a lane per concurrent activity:
// calls that overlap in time (step futures, a timer beside a step, a child
// beside its parent's steps) are drawn side by side, and calls that follow
// one another share a lane.
//
// The page's Content-Security-Policy (default-src 'self') allows no style
// attribute, so the bars are SVG: positions and widths are the SVG
// attributes x and width, in percent of the axis, which the policy does
// not govern, and the colours come from the stylesheet by class (the runs
// page's status bar is drawn the same way). Each bar is a nested <svg>,
// which clips its label to the bar, inside a link to the call's entry in
// the list of steps below (a child's leads to the child's page), where
// its times, input and output are.
//
// What each kind of call spans:
//
//   - a step: its attempts, from the first one's start to the last one's
//     end (or now while one runs); failed attempts are marked, and the
//     backoff before each retry is the gap drawn between two attempts, or
//     after the last one until the retry is due;
//   - a sleep or timer: from the call to its wake time. One whose wake
//     time has not come is pending while its execution goes on, and was
//     cancelled (never fired) if the execution ended first. A timer that
//     a select decided before it fired lost that select, and its bar ends
//     there: it lost the first select recorded after it that was decided
//     before its wake time and, when the select recorded its cases, names
//     it among them;
//   - an event wait: from the end of the durable call before it in the
//     execution's sequence (or the execution's start) to its delivery, or
//     on to now while it waits;
//   - a child: from the child run's start to its end (or now);
//   - a select, an update taken or replied to, an append to a stream, a
//     cancellation and an attribute setting are marks at the time they
//     were recorded; a select's says which case won.
//
// Checkpoints carried over by a restart from a step belong to an earlier
// execution's time and are not drawn; the list shows them.

const (
	// laneHeight is the height of a lane, in pixels.
	laneHeight = 22
	// laneBar is the height of a bar in its lane.
	laneBar = 16
	// markRow is the height of the row of marks above the lanes.
	markRow = 20
	// minBar is the narrowest a bar is drawn, in percent of the axis, so
	// that a call of a millisecond in a run of an hour still shows.
	minBar = 0.35
	// maxLanes caps the lanes: calls that would need more share the lane
	// that frees first.
	maxLanes = 32
	// maxDrawn caps the calls drawn; the list shows them all.
	maxDrawn = 600
	// maxStrip caps the executions drawn on the run's axis: the latest.
	maxStrip = 50
)

// timelineView is the timeline the run page draws.
type timelineView struct {
	// Execution is the execution whose calls are drawn.
	Execution int
	// Start and End are the ends of the axis, to the millisecond; Span
	// its length. Live says End is now: the execution goes on.
	Start, End *moment
	Span       string
	Live       bool
	Ticks      []tickView
	// Lanes counts the lanes; Height is the height of the lanes' drawing
	// in pixels, LanesTop where the lanes begin (below the marks).
	Lanes, Height, LanesTop int
	// LaneRows are the lanes' backgrounds.
	LaneRows []laneRow
	Items    []tlItem
	Marks    []tlMark
	// Strip is the run's executions on one axis, when it has several;
	// StripStart and StripEnd its ends.
	Strip                []tlExec
	StripStart, StripEnd *moment
	// Carried counts the calls carried over from an earlier execution,
	// not drawn; Omitted those left out over maxDrawn.
	Carried, Omitted int
	// Drawing is the lanes' SVG content (lanes, grid, marks and bars) and
	// StripDrawing the strip's (its executions), written by drawing.
	Drawing, StripDrawing template.HTML
}

// laneRow is one lane's background: its number, from 1, and top; every
// other lane is Odd, shaded.
type laneRow struct {
	N, Y int
	Odd  bool
}

// tickView is one tick of the axis: where, and its offset from the start.
type tickView struct {
	X, Label string
	// End says the label is drawn to the tick's left (the last ticks).
	End bool
}

// tlItem is one call drawn as a bar.
type tlItem struct {
	// Ref is the call's entry in the list of steps; Href what the bar
	// links to (the entry, or a child's page).
	Ref, Href             string
	Key, Kind, State      string
	Lane, Y, TextY        int
	X, W                  string
	Label, Title, Caption string
	// Open says the call goes on past the axis's end: it is pending,
	// running or waiting now, or its wake time is later.
	Open bool
	// Segs are a step's attempts and backoffs; Attempts and Failed count
	// its attempts and the failed ones.
	Segs             []tlSeg
	Attempts, Failed int
	// ChildID is a child's run ID.
	ChildID string
}

// tlSeg is a part of a bar: an attempt, or the backoff before a retry. X
// and W are in percent of the bar.
type tlSeg struct {
	X, W, Class, Title string
	Attempt            int
	Failed             bool
}

// tlMark is a call drawn as a mark at one time.
type tlMark struct {
	Ref, Href, Key, Kind, X, Label, Title string
	// LX and W place the label: from LX, W wide, in percent of the axis.
	// It is right of the mark, up to the next one, unless the mark is
	// near the axis's end: then Left, it ends at the mark.
	LX, W string
	Left  bool
	// Won is a select's winning case, by key when the select recorded its
	// cases, else by number ("case 2").
	Won string
}

// tlExec is one execution on the run's axis.
type tlExec struct {
	Number          int
	Status, X, W    string
	Href, Title     string
	Label           string
	Shown, Open     bool
	Start, End      *moment
	Duration        string
	ForkedFrom      int
	FromStep, Error string
}

// stepTime is a call's place in time as the list of steps shows it.
type stepTime struct {
	Start, End *moment
	// Took is how long it took (or has taken so far, when Open).
	Took string
	Open bool
	// Note says more: a lost timer's select, a select's winner.
	Note string
	// State is the call's state as the timeline finds it: a step's
	// status, except for a sleep or timer (complete once fired, pending,
	// lost or cancelled).
	State string
}

// childTimes is what the timeline knows of a child run.
type childTimes struct {
	Start  time.Time
	End    *time.Time
	Status string
}

// timelineIn is what the timeline is made from.
type timelineIn struct {
	RunID, Base string
	// Href is the run page's URL, to which links to executions and list
	// entries are relative.
	Href string
	// Shown is the execution drawn; Execs the run's executions, oldest
	// first.
	Shown int
	Execs []runtime.ExecutionInfo
	// Live says the execution shown goes on (the run's current one, not
	// finished).
	Live  bool
	Steps []runtime.StepInfo
	// Children are the run's children by ID, as far as known.
	Children map[string]childTimes
	Now      time.Time
}

// call is one step of the execution as the timeline places it.
type call struct {
	i           int
	kind, state string
	start, end  time.Time
	// open says end is now and the call goes on; beyond that it goes on
	// past the axis's end (a wake time later than now).
	open, beyond bool
	mark, drawn  bool
	note, won    string
	// wake is a sleep's wake time.
	wake time.Time
}

// timeline places the calls of in.Steps, and returns the drawing and
// each step's time as the list shows it (by index in in.Steps).
func timeline(in timelineIn) (*timelineView, []stepTime) {
	var exec runtime.ExecutionInfo
	for _, x := range in.Execs {
		if x.Number == in.Shown {
			exec = x
		}
	}
	if len(in.Steps) == 0 && len(in.Execs) < 2 {
		return nil, nil // nothing to draw: the list says there are no steps
	}
	axisStart := exec.StartedAt
	if axisStart.IsZero() {
		axisStart = in.Now // an execution not begun (a run still queued)
	}
	axisEnd := in.Now
	if exec.EndedAt != nil && !in.Live {
		axisEnd = *exec.EndedAt
	}
	calls := place(in, axisStart, axisEnd)

	times := make([]stepTime, len(in.Steps))
	day := axisStart.UTC()
	for _, c := range calls {
		st := stepTime{Start: atMilli(c.start, day), Note: c.note, Open: c.open, State: c.state}
		if !c.mark {
			st.End = atMilli(c.end, day)
			st.Took = took(c.end.Sub(c.start))
		}
		if c.open {
			st.End = nil
		}
		if c.start.IsZero() {
			st = stepTime{Note: c.note, State: c.state}
		}
		times[c.i] = st
	}

	v := &timelineView{Execution: in.Shown, Live: in.Live}
	// The axis holds every drawn call's start and closed end.
	for _, c := range calls {
		if !c.drawn {
			continue
		}
		if c.start.Before(axisStart) {
			axisStart = c.start
		}
		if !c.open && !c.beyond && c.end.After(axisEnd) {
			axisEnd = c.end
		}
	}
	span := axisEnd.Sub(axisStart)
	if span <= 0 {
		span = time.Millisecond
	}
	v.Start, v.End, v.Span = atMilli(axisStart, day), atMilli(axisEnd, day), took(span)
	pct := func(t time.Time) float64 {
		p := float64(t.Sub(axisStart)) / float64(span) * 100
		return min(max(p, 0), 100)
	}
	v.Ticks = ticks(span)

	// Bars, in lanes: each call goes in the first lane free at its start.
	var bars, marks []*call
	for i := range calls {
		c := &calls[i]
		switch {
		case !c.drawn:
			if in.Steps[c.i].ForkedFrom > 0 {
				v.Carried++
			}
		case len(bars)+len(marks) >= maxDrawn:
			v.Omitted++
		case c.mark:
			marks = append(marks, c)
		default:
			bars = append(bars, c)
		}
	}
	slices.SortStableFunc(bars, func(a, b *call) int { return a.start.Compare(b.start) })
	// A lane is free from the end of its last call, in time: calls that
	// follow one another share a lane even where their bars, widened to
	// minBar, overlap; only calls that overlap in time get lanes apart.
	var laneEnds []time.Time
	for _, c := range bars {
		s := in.Steps[c.i]
		x, end := pct(c.start), pct(c.end)
		if c.open {
			end = 100
		}
		w := max(end-x, minBar)
		if x+w > 100 {
			x = 100 - w
		}
		lane := -1
		for l, e := range laneEnds {
			if !c.start.Before(e) {
				lane = l
				break
			}
		}
		if lane < 0 && len(laneEnds) < maxLanes {
			lane = len(laneEnds)
			laneEnds = append(laneEnds, time.Time{})
		}
		if lane < 0 {
			lane = 0
			for l, e := range laneEnds {
				if e.Before(laneEnds[lane]) {
					lane = l
				}
			}
		}
		laneEnds[lane] = c.end
		it := tlItem{Ref: stepRef(c.i), Key: s.Key, Kind: string(s.Kind), State: c.state, Lane: lane + 1,
			X: percent(x), W: percent(w), Open: c.open || c.beyond}
		it.Href = "#" + it.Ref
		if s.Kind == runtime.KindChild {
			it.ChildID = in.RunID + "/" + s.Key
			it.Href = in.Base + runPath(it.ChildID, "")
		}
		length := ""
		if !c.end.IsZero() {
			length = took(c.end.Sub(c.start))
		}
		it.Label = shownPlain(s.Key)
		if length != "" {
			it.Label += " · " + length
			if c.open {
				it.Label += " so far"
			}
		}
		switch c.state {
		case "pending", "lost", "cancelled", "failed", "timed_out", "retrying", "interrupted":
			it.Label += ", " + strings.ReplaceAll(c.state, "_", " ")
		}
		it.Caption = length
		if s.Kind == runtime.KindStep {
			it.Segs, it.Attempts, it.Failed = segments(s, c, in.Now)
		}
		it.Title = itemTitle(s, c, length, day)
		v.Items = append(v.Items, it)
	}
	v.Lanes = len(laneEnds)
	v.LanesTop = 0
	if len(marks) > 0 {
		v.LanesTop = markRow
	}
	for i := range v.Items {
		v.Items[i].Y = v.LanesTop + (v.Items[i].Lane-1)*laneHeight + (laneHeight-laneBar)/2
		v.Items[i].TextY = laneBar/2 + 4
	}
	v.Height = v.LanesTop + v.Lanes*laneHeight
	for l := range v.Lanes {
		v.LaneRows = append(v.LaneRows, laneRow{N: l + 1, Y: v.LanesTop + l*laneHeight, Odd: l%2 == 1})
	}
	if v.Height == 0 {
		v.Height = markRow
	}

	// Marks, in time order, each with room for its label up to the next.
	slices.SortStableFunc(marks, func(a, b *call) int { return a.start.Compare(b.start) })
	for k, c := range marks {
		s := in.Steps[c.i]
		x := pct(c.start)
		room := 100 - x
		if k+1 < len(marks) {
			room = pct(marks[k+1].start) - x
		}
		room = max(min(room, 25), 0)
		m := tlMark{Ref: stepRef(c.i), Key: s.Key, Kind: string(s.Kind), X: percent(x), LX: percent(x), W: percent(room), Won: c.won}
		if room < 15 && x > 50 && k+1 == len(marks) {
			left := min(x, 25)
			if k > 0 {
				left = min(left, x-pct(marks[k-1].start))
			}
			m.Left, m.LX, m.W = true, percent(x-left), percent(left)
		}
		m.Href = "#" + m.Ref
		m.Label = shownPlain(s.Key)
		if c.won != "" {
			m.Label += " → " + c.won
		}
		m.Title = fmt.Sprintf("%s %s at %s UTC", s.Kind, shownPlain(s.Key), atMilli(c.start, day).Text)
		if c.note != "" {
			m.Title += "\n" + c.note
		}
		v.Marks = append(v.Marks, m)
	}

	v.Strip, v.StripStart, v.StripEnd = strip(in)
	v.Drawing, v.StripDrawing = v.drawing(), v.stripDrawing()
	return v, times
}

// svgWriter writes SVG markup, escaping every value it is given for an
// attribute in double quotes or an element's text.
type svgWriter struct{ strings.Builder }

// raw writes markup as it is.
func (w *svgWriter) raw(s string) { w.WriteString(s) }

// text writes s escaped.
func (w *svgWriter) text(s string) { w.WriteString(template.HTMLEscapeString(s)) }

// attr writes ` name="value"`, value escaped.
func (w *svgWriter) attr(name, value string) {
	w.WriteString(" " + name + `="`)
	w.text(value)
	w.WriteByte('"')
}

// drawing writes the lanes' SVG content: each lane's background, the
// ticks' grid, the marks and the bars. It is written here, not by the
// page's template, as a run of a thousand calls would cost the template
// tens of thousands of escaper calls, doubling the page's time; what it
// writes is escaped all the same (svgWriter).
func (v *timelineView) drawing() template.HTML {
	var w svgWriter
	w.Grow(400 * (len(v.Items) + len(v.Marks) + 4))
	for _, l := range v.LaneRows {
		w.raw(`<rect class="tl-lane`)
		if l.Odd {
			w.raw(" odd")
		}
		w.raw(`" x="0"`)
		w.attr("y", strconv.Itoa(l.Y))
		w.raw(` width="100%" height="` + strconv.Itoa(laneHeight) + `"/>`)
	}
	for _, t := range v.Ticks {
		w.raw(`<line class="tl-grid"`)
		w.attr("x1", t.X)
		w.attr("x2", t.X)
		w.raw(` y1="0" y2="100%"/>`)
	}
	for _, m := range v.Marks {
		w.raw("<a")
		w.attr("href", m.Href)
		w.raw(`><g class="tl-mark k-`)
		w.text(m.Kind)
		w.raw(`"`)
		w.attr("data-call", m.Key)
		w.attr("data-kind", m.Kind)
		if m.Won != "" {
			w.attr("data-won", m.Won)
		}
		w.raw("><title>")
		w.text(m.Title)
		w.raw("</title><line")
		w.attr("x1", m.X)
		w.attr("x2", m.X)
		w.raw(` y1="4" y2="100%"/><svg`)
		w.attr("x", m.X)
		w.raw(` y="10" width="1" height="1" overflow="visible"><path d="M0 -5 L5 0 L0 5 L-5 0 Z"/></svg><svg`)
		w.attr("x", m.LX)
		w.attr("width", m.W)
		w.raw(` y="0"`)
		w.attr("height", strconv.Itoa(v.LanesTop))
		if m.Left {
			w.raw(`><text x="100%" dx="-8" y="14" text-anchor="end">`)
		} else {
			w.raw(`><text x="8" y="14">`)
		}
		w.text(m.Label)
		w.raw("</text></svg></g></a>")
	}
	for _, it := range v.Items {
		w.raw("<a")
		w.attr("href", it.Href)
		w.raw(`><svg class="tl-item k-`)
		w.text(it.Kind)
		w.raw(" st-")
		w.text(it.State)
		if it.Open {
			w.raw(" open")
		}
		w.raw(`"`)
		w.attr("x", it.X)
		w.attr("y", strconv.Itoa(it.Y))
		w.attr("width", it.W)
		w.raw(` height="` + strconv.Itoa(laneBar) + `"`)
		w.attr("data-call", it.Key)
		w.attr("data-kind", it.Kind)
		w.attr("data-state", it.State)
		w.attr("data-lane", strconv.Itoa(it.Lane))
		w.attr("data-took", it.Caption)
		if it.ChildID != "" {
			w.attr("data-child", it.ChildID)
		}
		if it.Attempts > 0 {
			w.attr("data-attempts", strconv.Itoa(it.Attempts))
			w.attr("data-failed", strconv.Itoa(it.Failed))
		}
		w.raw("><title>")
		w.text(it.Title)
		w.raw(`</title><rect class="tl-bar" width="100%" height="100%" rx="2"/>`)
		for _, sg := range it.Segs {
			w.raw("<rect")
			w.attr("class", sg.Class)
			w.attr("x", sg.X)
			w.raw(` y="2"`)
			w.attr("width", sg.W)
			w.raw(` height="` + strconv.Itoa(laneBar-4) + `"`)
			if sg.Attempt > 0 {
				w.attr("data-attempt", strconv.Itoa(sg.Attempt))
			}
			w.raw("><title>")
			w.text(sg.Title)
			w.raw("</title></rect>")
		}
		w.raw(`<text x="4"`)
		w.attr("y", strconv.Itoa(it.TextY))
		w.raw(">")
		w.text(it.Label)
		w.raw("</text></svg></a>")
	}
	return template.HTML(w.String())
}

// stripDrawing writes the strip's SVG content: its executions.
func (v *timelineView) stripDrawing() template.HTML {
	if len(v.Strip) == 0 {
		return ""
	}
	var w svgWriter
	for _, e := range v.Strip {
		w.raw("<a")
		w.attr("href", e.Href)
		if e.Shown {
			w.raw(` aria-current="true"`)
		}
		w.raw(`><svg class="tl-exec st-`)
		w.text(e.Status)
		if e.Shown {
			w.raw(" shown")
		}
		if e.Open {
			w.raw(" open")
		}
		w.raw(`"`)
		w.attr("x", e.X)
		w.attr("width", e.W)
		w.raw(` y="2" height="20"`)
		w.attr("data-execution", strconv.Itoa(e.Number))
		w.attr("data-status", e.Status)
		w.raw("><title>")
		w.text(e.Title)
		w.raw(`</title><rect class="tl-bar" width="100%" height="100%" rx="3"/><text x="5" y="14">`)
		w.text(e.Label)
		w.raw("</text></svg></a>")
	}
	return template.HTML(w.String())
}

// place finds each step's place in time and state.
func place(in timelineIn, execStart, axisEnd time.Time) []call {
	steps := in.Steps
	calls := make([]call, len(steps))
	// prevCall is the durable call before, in the execution's sequence
	// (-1: none): a wait after it began at its end.
	prevCall := -1
	endOf := func(j int, before time.Time) time.Time {
		// A call's end as the start of the wait after it: a timer whose
		// wake time is later than the wait's end did not hold the run
		// until then, so its call's time counts instead.
		c := calls[j]
		if c.start.IsZero() || c.end.After(before) || c.open {
			return steps[j].CreatedAt
		}
		return c.end
	}
	for i, s := range steps {
		c := &calls[i]
		c.i, c.kind, c.state = i, string(s.Kind), stepStatus(s)
		c.drawn = s.ForkedFrom == 0
		waitStart := func(until time.Time) time.Time {
			t := execStart
			if prevCall >= 0 {
				t = endOf(prevCall, until)
			}
			if t.Before(execStart) {
				t = execStart
			}
			if t.After(until) {
				t = until
			}
			return t
		}
		switch s.Kind {
		case runtime.KindStep:
			placeStep(c, s, in.Now)
		case runtime.KindSleep:
			c.start = s.CreatedAt
			var wake time.Time
			if json.Unmarshal(s.Output, &wake) != nil || wake.IsZero() {
				c.end, c.mark = s.CreatedAt, true
				break
			}
			c.wake, c.end = wake, wake
		case runtime.KindChild:
			placeChild(c, s, in, waitStart)
		case runtime.KindEvent, runtime.KindUpdate:
			if s.Status == runtime.StepWaiting {
				c.end, c.open = in.Now, true
				c.start = waitStart(in.Now)
				break
			}
			if s.Kind == runtime.KindUpdate {
				c.start, c.end, c.mark = s.CreatedAt, s.CreatedAt, true
				break
			}
			c.end = s.CreatedAt
			c.start = waitStart(s.CreatedAt)
		case runtime.KindSelect:
			c.start, c.end, c.mark = s.CreatedAt, s.CreatedAt, true
			c.won = selectWinner(s)
			if c.won != "" {
				c.note = c.won + " won"
			}
		default:
			c.start, c.end, c.mark = s.CreatedAt, s.CreatedAt, true
		}
		if c.start.IsZero() {
			c.drawn = false
		}
		if s.Seq > 0 {
			prevCall = i
		}
	}
	// Sleeps and timers: fired, pending, lost to a select, or cancelled
	// by the execution's end.
	var selects []int
	for i, s := range steps {
		if s.Kind == runtime.KindSelect && s.Seq > 0 {
			selects = append(selects, i)
		}
	}
	slices.SortStableFunc(selects, func(a, b int) int { return cmp.Compare(steps[a].Seq, steps[b].Seq) })
	for i, s := range steps {
		c := &calls[i]
		if s.Kind != runtime.KindSleep || c.wake.IsZero() {
			continue
		}
		if sel, ok := lostTo(steps, calls, selects, i); ok {
			c.state, c.end = "lost", steps[sel].CreatedAt
			c.note = fmt.Sprintf("lost select %s, decided at %s UTC before its wake time %s", shownPlain(steps[sel].Key),
				atMilli(steps[sel].CreatedAt, c.start.UTC()).Text, atMilli(c.wake, c.start.UTC()).Text)
			continue
		}
		switch {
		case !c.wake.After(axisEnd):
			c.state = string(runtime.StepComplete)
		case in.Live:
			c.state, c.beyond = "pending", true
			c.note = "wakes at " + atMilli(c.wake, c.start.UTC()).Text + " UTC"
		default:
			c.state, c.end = "cancelled", axisEnd
			c.note = "never fired: its execution ended before its wake time " + atMilli(c.wake, c.start.UTC()).Text + " UTC"
		}
	}
	return calls
}

// placeStep places a step function's call: from its first attempt's
// start to its last one's end, or now while one runs or a retry is due.
func placeStep(c *call, s runtime.StepInfo, now time.Time) {
	for _, a := range s.Attempts {
		if c.start.IsZero() || a.Started.Before(c.start) {
			c.start = a.Started
		}
		if a.Ended.After(c.end) {
			c.end = a.Ended
		}
	}
	switch s.Status {
	case runtime.StepRunning:
		if c.start.IsZero() || s.Started.Before(c.start) {
			c.start = s.Started
		}
		c.end, c.open = now, true
	case runtime.StepRetrying:
		c.end, c.open = now, true
		if c.start.IsZero() {
			c.start = now
		}
	}
	if c.start.IsZero() {
		// No attempt recorded (a cancellation written before its retry):
		// a mark at its checkpoint.
		c.start, c.end, c.mark = s.CreatedAt, s.CreatedAt, true
	}
}

// placeChild places a child's call: the child run's own start to end.
// Without the child's record, it spans as a wait would, to its outcome's
// checkpoint.
func placeChild(c *call, s runtime.StepInfo, in timelineIn, waitStart func(time.Time) time.Time) {
	ch, ok := in.Children[in.RunID+"/"+s.Key]
	if ok && !ch.Start.IsZero() {
		c.start = ch.Start
		if ch.End != nil {
			c.end = *ch.End
		} else {
			c.end, c.open = in.Now, true
		}
		if ch.Status != "" {
			c.note = "child run " + ch.Status
		}
		return
	}
	if s.Status == runtime.StepWaiting || s.Seq == 0 {
		c.end, c.open = in.Now, true
		c.start = waitStart(in.Now)
		return
	}
	c.end = s.CreatedAt
	c.start = waitStart(s.CreatedAt)
}

// lostTo says which select the timer at i lost: the first select recorded
// after it and decided before its wake time, that either recorded its
// cases with the timer among them (and another the winner) or recorded
// none.
// selects are the indexes of the selects among steps, in sequence.
func lostTo(steps []runtime.StepInfo, calls []call, selects []int, i int) (int, bool) {
	t := steps[i]
	if t.Seq == 0 {
		return 0, false
	}
	from := sort.Search(len(selects), func(k int) bool { return steps[selects[k]].Seq > t.Seq })
	for _, j := range selects[from:] {
		s := steps[j]
		if s.Execution != t.Execution {
			continue
		}
		if !s.CreatedAt.Before(calls[i].wake) {
			return 0, false
		}
		cases, won, ok := selectCases(s)
		if !ok {
			return j, true
		}
		if slices.Contains(cases, t.Key) {
			return j, won != t.Key
		}
	}
	return 0, false
}

// selectCases reads a select's recorded cases (its input: their keys, in
// order) and its winner's key; ok is false when it recorded none.
func selectCases(s runtime.StepInfo) (cases []string, won string, ok bool) {
	if len(s.Input) == 0 || json.Unmarshal(s.Input, &cases) != nil || len(cases) == 0 {
		return nil, "", false
	}
	if n, ok := selectCase(s.Output); ok && n >= 0 && n < len(cases) {
		won = cases[n]
	}
	return cases, won, true
}

// selectCase reads the winning case's number from a select's output: a
// bare number, or {"case": n, ...}.
func selectCase(out json.RawMessage) (int, bool) {
	if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil {
		return n, true
	}
	var o struct {
		Case *int `json:"case"`
	}
	if json.Unmarshal(out, &o) == nil && o.Case != nil {
		return *o.Case, true
	}
	return 0, false
}

// selectWinner names a select's winning case: its key when the select
// recorded its cases, else its number, from 1 as a reader counts ("case
// 2"); "" when its output says neither.
func selectWinner(s runtime.StepInfo) string {
	if _, won, ok := selectCases(s); ok && won != "" {
		return shownPlain(won)
	}
	if n, ok := selectCase(s.Output); ok {
		return "case " + strconv.Itoa(n+1)
	}
	return ""
}

// segments draws a step's attempts, and the backoff before each retry,
// within its bar (in percent of the bar's span); a step of one attempt
// that succeeded needs none.
func segments(s runtime.StepInfo, c *call, now time.Time) (segs []tlSeg, attempts, failed int) {
	if len(s.Attempts) == 1 && s.Attempts[0].Error == "" && s.Status != runtime.StepRunning {
		return nil, 1, 0 // one attempt that succeeded: the bar is that attempt
	}
	span := c.end.Sub(c.start)
	if span <= 0 {
		span = time.Millisecond
	}
	day := c.start.UTC()
	pos := func(t time.Time) float64 {
		return min(max(float64(t.Sub(c.start))/float64(span)*100, 0), 100)
	}
	add := func(from, to time.Time, class, title string, attempt int, fail bool) {
		x, e := pos(from), pos(to)
		segs = append(segs, tlSeg{X: percent(x), W: percent(max(e-x, 0.5)), Class: class, Title: title, Attempt: attempt, Failed: fail})
	}
	for k, a := range s.Attempts {
		attempts++
		end := a.Ended
		if end.IsZero() {
			end = now
		}
		title := fmt.Sprintf("attempt %d: %s → %s UTC (%s)", a.Number, atMilli(a.Started, day).Text, atMilli(end, day).Text, took(end.Sub(a.Started)))
		class := "tl-attempt"
		if a.Error != "" {
			failed++
			class += " failed"
			title += ", failed: " + firstLine(a.Error)
		}
		add(a.Started, end, class, title, a.Number, a.Error != "")
		// The backoff: to the next attempt's start, or to the retry's due
		// time while it waits.
		var next time.Time
		switch {
		case k+1 < len(s.Attempts):
			next = s.Attempts[k+1].Started
		case s.Status == runtime.StepRunning:
			next = s.Started
		case a.RetryAt != nil:
			next = *a.RetryAt
		}
		if a.Error != "" && next.After(end) {
			add(end, next, "tl-backoff", fmt.Sprintf("backoff: attempt %d due at %s UTC, %s after", a.Number+1, atMilli(next, day).Text, took(next.Sub(end))), 0, false)
		}
	}
	if s.Status == runtime.StepRunning {
		attempts++
		add(s.Started, now, "tl-attempt running", fmt.Sprintf("attempt %d: running since %s UTC (%s so far)", s.Attempt, atMilli(s.Started, day).Text, took(now.Sub(s.Started))), s.Attempt, false)
	}
	return segs, attempts, failed
}

// itemTitle is a bar's tooltip: what it is, its times and duration.
func itemTitle(s runtime.StepInfo, c *call, length string, day time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s", s.Kind, shownPlain(s.Key), strings.ReplaceAll(c.state, "_", " "))
	fmt.Fprintf(&b, "\n%s → ", atMilli(c.start, day).Text)
	if c.open {
		b.WriteString("now")
	} else {
		b.WriteString(atMilli(c.end, day).Text)
	}
	b.WriteString(" UTC")
	if length != "" {
		fmt.Fprintf(&b, " (%s)", length)
	}
	if s.Kind == runtime.KindStep && len(s.Attempts) > 1 {
		fmt.Fprintf(&b, "\n%d attempts", len(s.Attempts))
	}
	if c.note != "" {
		b.WriteString("\n" + c.note)
	}
	return b.String()
}

// ticks are the axis's ticks: round offsets from its start, five to ten.
func ticks(span time.Duration) []tickView {
	steps := []time.Duration{
		time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour, 7 * 24 * time.Hour,
	}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if span/s <= 8 {
			step = s
			break
		}
	}
	for span/step > 10 {
		step *= 2
	}
	var out []tickView
	for t := step; t < span; t += step {
		p := float64(t) / float64(span) * 100
		if p > 97 {
			break
		}
		out = append(out, tickView{X: percent(p), Label: "+" + took(t), End: p > 90})
	}
	return out
}

// strip draws the run's executions on one axis, when it has more than
// one: the latest maxStrip.
func strip(in timelineIn) ([]tlExec, *moment, *moment) {
	xs := in.Execs
	if len(xs) < 2 {
		return nil, nil, nil
	}
	if len(xs) > maxStrip {
		xs = xs[len(xs)-maxStrip:]
	}
	start, end := xs[0].StartedAt, in.Now
	last := xs[len(xs)-1]
	if last.EndedAt != nil {
		end = *last.EndedAt
	}
	for _, x := range xs {
		if x.EndedAt != nil && x.EndedAt.After(end) {
			end = *x.EndedAt
		}
	}
	span := end.Sub(start)
	if span <= 0 {
		span = time.Millisecond
	}
	day := start.UTC()
	var out []tlExec
	for _, x := range xs {
		e := tlExec{Number: x.Number, Status: string(x.Status), Shown: x.Number == in.Shown, ForkedFrom: x.ForkedFrom, FromStep: x.FromStep,
			Start: atMilli(x.StartedAt, day), Href: withQuery(in.Href, url.Values{"execution": {strconv.Itoa(x.Number)}})}
		xe := end
		if x.EndedAt != nil {
			xe = *x.EndedAt
			e.End = atMilli(xe, day)
		} else {
			e.Open = true
		}
		e.Duration = took(xe.Sub(x.StartedAt))
		p := min(max(float64(x.StartedAt.Sub(start))/float64(span)*100, 0), 100)
		w := max(float64(xe.Sub(x.StartedAt))/float64(span)*100, minBar)
		if p+w > 100 {
			p = 100 - w
		}
		e.X, e.W = percent(p), percent(w)
		e.Label = fmt.Sprintf("#%d %s · %s", x.Number, x.Status, e.Duration)
		var t strings.Builder
		fmt.Fprintf(&t, "execution %d: %s\n%s → ", x.Number, x.Status, e.Start.Text)
		if e.End != nil {
			t.WriteString(e.End.Text)
		} else {
			t.WriteString("now")
		}
		fmt.Fprintf(&t, " UTC (%s)", e.Duration)
		if x.FromStep != "" {
			fmt.Fprintf(&t, "\nrestarted from step %s of execution %d", x.FromStep, x.ForkedFrom)
		}
		if x.Err != nil {
			t.WriteString("\n" + firstLine(x.Err.Error()))
			var se *runtime.SealedError
			if !errors.As(x.Err, &se) {
				e.Error = firstLine(x.Err.Error())
			}
		}
		e.Title = t.String()
		out = append(out, e)
	}
	return out, atMilli(start, day), atMilli(end, day)
}

// stepRef is the anchor of the i-th step in the list of steps.
func stepRef(i int) string { return "step-" + strconv.Itoa(i+1) }

// percent writes p for an SVG attribute: "12.34%".
func percent(p float64) string {
	return strconv.FormatFloat(p, 'f', 2, 64) + "%"
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// atMilli is t as the timeline shows it: in UTC to the millisecond
// ("12:03:04.567"), with its date when it is not day's.
func atMilli(t time.Time, day time.Time) *moment {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	text := u.Format("15:04:05.000")
	if y, m, d := u.Date(); y != day.Year() || m != day.Month() || d != day.Day() {
		text = u.Format("2006-01-02 15:04:05.000")
	}
	return &moment{ISO: u.Format(time.RFC3339Nano), Text: text}
}

// atMilliPtr is atMilli for a time that may be nil.
func atMilliPtr(t *time.Time, day time.Time) *moment {
	if t == nil {
		return nil
	}
	return atMilli(*t, day)
}

// took is duration(d) rounded first to the unit it is written in, so that
// 59m59.9s reads 1h, not 60m.
func took(d time.Duration) string {
	switch a := d.Abs(); {
	case a < time.Millisecond:
	case a < time.Second:
		d = d.Round(time.Millisecond)
	case a < time.Minute:
		d = d.Round(10 * time.Millisecond)
	case a < time.Hour:
		d = d.Round(time.Second)
	default:
		d = d.Round(time.Minute)
	}
	return duration(d)
}

// html is the step's time as its head in the list shows it: start → end
// (or now) in UTC, and how long it took; "" when it has no start. It is
// written here, not by the template, for the same reason as the drawing.
func (st stepTime) html() template.HTML {
	if st.Start == nil {
		return ""
	}
	var w svgWriter
	w.raw(` <span class="at when">`)
	writeTime(&w, st.Start)
	switch {
	case st.Open:
		w.raw(" → now")
	case st.End != nil:
		w.raw(" → ")
		writeTime(&w, st.End)
	}
	w.raw(" UTC</span>")
	if st.Took != "" {
		w.raw(` <span class="took">`)
		w.text(st.Took)
		if st.Open {
			w.raw(" so far")
		}
		w.raw("</span>")
	}
	return template.HTML(w.String())
}

// writeTime writes m as <time datetime="ISO">Text</time>.
func writeTime(w *svgWriter, m *moment) {
	w.raw("<time")
	w.attr("datetime", m.ISO)
	w.raw(">")
	w.text(m.Text)
	w.raw("</time>")
}
