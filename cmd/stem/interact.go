package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// Updates and streams: stem update asks a running workflow something and
// prints its reply; stem stream prints what a run writes to one of its
// streams; stem show lists both, and with --follow prints the streams'
// new values as they come.

func update(fs *flag.FlagSet) func(*call, []string) error {
	id := fs.String("id", "", "send the update as `UPDATE_ID`; sending an ID again finds the first update and its reply (default: a generated one)")
	unvalidated := fs.Bool("unvalidated", false, "send an update that has a validator (which only the application can run), or one no worker records, without that check")
	noWait := fs.Bool("no-wait", false, "print the update's ID and return without waiting for the reply")
	wait := fs.Duration("timeout", timeout, "wait at most `DUR` for the reply")
	return func(c *call, args []string) error {
		c.subject = args[0]
		runID, name := args[0], args[1]
		if err := storage.CheckUpdateName(name); err != nil {
			return argError{fmt.Sprintf("update name %q: %s", name, nameReason(err))}
		}
		if *id != "" {
			if err := storage.CheckUpdateID(*id); err != nil {
				return usagef("--id: %s", nameReason(err))
			}
		}
		if *wait <= 0 {
			return usagef("--timeout %v: want more than 0", *wait)
		}
		req, err := c.jsonArg("request", args[2])
		if err != nil {
			return err
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		if err := c.checkSealKey(e); err != nil {
			return err
		}
		// The run first: a mistyped run ID is the mistake to report, not
		// what the update would need.
		if _, err := e.Get(c.ctx, runID); err != nil {
			return err
		}
		if !*unvalidated {
			if err := c.checkUpdate(e, name); err != nil {
				return err
			}
		}
		var opts []runtime.UpdateOption
		if *id != "" {
			opts = append(opts, runtime.WithUpdateID(*id))
		}
		h, err := e.SendUpdateJSON(c.ctx, runID, name, req, *unvalidated, opts...)
		switch {
		case errors.Is(err, runtime.ErrUpdateRunEnded):
			status := "ended"
			if r, gerr := e.Get(c.ctx, runID); gerr == nil {
				status = string(r.Status)
			}
			return fmt.Errorf("the run has ended (%s): it takes no update", status)
		case err != nil:
			return err
		}
		if *noWait {
			u, err := c.store.GetUpdate(c.ctx, runID, h.ID)
			if err != nil {
				return err
			}
			if c.out.json {
				return c.out.encode(jsonUpdateSent{jsonUpdate: jsonUpdateOf(e, u, ""), Created: h.Created})
			}
			_, err = fmt.Fprintln(c.out.w, clean(h.ID))
			return err
		}

		// The command's timeout bounds the store's answers; the wait for
		// the reply is --timeout's, or ends at Ctrl-C.
		sig, stop := signal.NotifyContext(context.WithoutCancel(c.ctx), os.Interrupt, syscall.SIGTERM)
		defer stop()
		ctx, cancel := context.WithTimeout(sig, *wait)
		defer cancel()
		u, err := e.AwaitUpdate(ctx, h)
		switch {
		case err != nil && ctx.Err() != nil:
			why := fmt.Sprintf("no reply within %v", *wait)
			if sig.Err() != nil {
				why = "interrupted before the reply came"
			}
			again := c.command("update", runID, name, args[2], "--id", h.ID)
			return fmt.Errorf("%s: update %s is pending; %s waits for its reply again", why, h.ID, again)
		case err != nil:
			return err
		}
		j := jsonUpdateOf(e, u, "")
		if c.out.json {
			if err := c.out.encode(jsonUpdateSent{jsonUpdate: j, Created: h.Created}); err != nil {
				return err
			}
			if j.Error != "" {
				return exitCode(1)
			}
			return nil
		}
		_, reply, replyErr, openErr := e.OpenUpdate(u)
		switch {
		case replyErr != nil:
			return fmt.Errorf("update %s (%s) replied with an error: %s", h.ID, name, errNote(replyErr, false))
		case openErr != nil:
			note, _ := sealedNote(openErr, "")
			return fmt.Errorf("update %s (%s) replied, but its reply is %s", h.ID, name, strings.TrimSuffix(strings.TrimPrefix(note, "("), ")"))
		}
		_, err = fmt.Fprintln(c.out.w, jsonEscape(string(reply)))
		return err
	}
}

// checkUpdate refuses, before anything is written, an update the catalog
// does not record (naming those it does, and the nearest) or one whose
// handler has a validator, which only the application can run; both
// unless --unvalidated. The runtime refuses them too; this says it with
// the command's flag.
func (c *call) checkUpdate(e *runtime.Engine, name string) error {
	cat, err := e.Catalog(c.ctx)
	if err != nil {
		return err
	}
	ups, _ := cat.Updates()
	names := make([]string, len(ups))
	for i, u := range ups {
		names[i] = u.Name
		if u.Name != name {
			continue
		}
		if u.Schema.Validator {
			return fmt.Errorf("update %q has a validator, which only the application that handles it can run: send it from the application, or give --unvalidated to send it without (its request is still checked against the recorded schema)", name)
		}
		return nil
	}
	msg := fmt.Sprintf("unknown update %q: no worker that shares %s records it", name, c.g.storeName())
	if best := nearest(name, names); best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	return fmt.Errorf("%s (known: %s; --unvalidated sends it all the same)", msg, listOrNone(names))
}

// waitNames are the topics a run waits on, as the command names them:
// an update's as "update NAME".
func waitNames(topics []string) []string {
	out := make([]string, len(topics))
	for i, t := range topics {
		if name, ok := storage.UpdateNameOf(t); ok {
			t = "update " + name
		}
		out[i] = t
	}
	return out
}

// listOrNone lists names, comma-separated, or says there are none.
func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// jsonUpdate is an update of a run. State is pending, replied, or
// unhandled: pending while its run has ended, so it will never be
// replied to. Request and Reply are JSON; Error is the error the workflow
// replied with, ErrorName its declared error's name. Sealed says why a
// payload that could not be opened is absent.
type jsonUpdate struct {
	RunID     string          `json:"run_id"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Seq       int64           `json:"seq"`
	State     string          `json:"state"`
	Request   json.RawMessage `json:"request,omitempty"`
	Reply     json.RawMessage `json:"reply,omitempty"`
	Error     string          `json:"error,omitempty"`
	ErrorName string          `json:"error_name,omitempty"`
	Sealed    string          `json:"sealed,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	RepliedAt *time.Time      `json:"replied_at,omitempty"`
}

// jsonUpdateSent is what stem update prints with --json: the update, and
// whether this call created it (false: the run had an update of the ID,
// whose reply this is).
type jsonUpdateSent struct {
	jsonUpdate
	Created bool `json:"created"`
}

// jsonUpdateOf is u as --json shows it; run is its run's status (""
// when not read).
func jsonUpdateOf(e *runtime.Engine, u storage.UpdateRecord, run storage.RunStatus) jsonUpdate {
	j := jsonUpdate{RunID: u.RunID, ID: u.ID, Name: u.Name, Seq: u.Seq, State: updateState(u, run), CreatedAt: u.CreatedAt, RepliedAt: u.RepliedAt}
	req, rep, repErr, err := e.OpenUpdate(u)
	j.Request, j.Reply = req, rep
	if repErr != nil {
		j.Error = errNote(repErr, true)
		j.ErrorName, _ = runtime.DeclaredErrorName(repErr)
	}
	if note, ok := sealedNote(err, ""); ok {
		j.Sealed = note
	}
	return j
}

// updateState is an update's state as shown: pending, replied, or
// unhandled (pending, and its run, whose status is run, has ended).
func updateState(u storage.UpdateRecord, run storage.RunStatus) string {
	if u.Unhandled(run) {
		return "unhandled"
	}
	return string(u.State)
}

// jsonStreamValue is one value of a stream, a line of its own with
// --json: stem stream prints them without Stream, stem show --follow with.
type jsonStreamValue struct {
	Stream    string          `json:"stream,omitempty"`
	Offset    int64           `json:"offset"`
	Value     json.RawMessage `json:"value"`
	WrittenAt time.Time       `json:"written_at"`
}

// jsonStream is one stream of a run.
type jsonStream struct {
	Name      string    `json:"name"`
	Length    int64     `json:"length"`
	Closed    bool      `json:"closed"`
	UpdatedAt time.Time `json:"updated_at"`
}

func jsonStreams(ss []storage.StreamInfo) []jsonStream {
	out := make([]jsonStream, len(ss))
	for i, s := range ss {
		out[i] = jsonStream{Name: s.Name, Length: s.Length, Closed: s.Closed, UpdatedAt: s.UpdatedAt}
	}
	return out
}

// line writes v as one line of JSON, for output that goes on (a stream
// followed) and is read a line at a time.
func (p *printer) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = io.WriteString(p.w, jsonEscape(string(b))+"\n")
	return err
}

func stream(fs *flag.FlagSet) func(*call, []string) error {
	from := fs.Int64("from", 0, "begin at offset `N` (the stream's first value is 0)")
	follow := fs.Bool("follow", false, "wait for new values until the stream is closed or the run ends (or Ctrl-C)")
	return func(c *call, args []string) error {
		c.subject = args[0]
		runID, name := args[0], args[1]
		if err := storage.CheckStreamName(name); err != nil {
			return argError{fmt.Sprintf("stream name %q: %s", name, nameReason(err))}
		}
		if *from < 0 {
			return usagef("--from %d: want 0 or more", *from)
		}
		e, err := c.open()
		if err != nil {
			return err
		}
		infos, err := e.Streams(c.ctx, runID)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(infos, func(s storage.StreamInfo) bool { return s.Name == name })
		if i < 0 {
			r, err := e.Get(c.ctx, runID)
			if err != nil {
				return err
			}
			if !*follow || r.Status.Finished() {
				return c.noStream(infos, name, r)
			}
			fmt.Fprintf(c.errw, "stem stream %s: the run has no stream %s yet; waiting for it\n", clean(runID), clean(name))
		}
		ctx := c.ctx
		if *follow {
			var stop context.CancelFunc
			ctx, stop = signal.NotifyContext(context.WithoutCancel(c.ctx), os.Interrupt, syscall.SIGTERM)
			defer stop()
		} else if end := infos[i].Length; *from >= end {
			if !c.out.json {
				state := "open"
				if infos[i].Closed {
					state = "closed"
				}
				fmt.Fprintf(c.errw, "stem stream %s: stream %s holds %d value(s), none from offset %d (%s)\n", clean(runID), clean(name), end, *from, state)
			}
			return nil
		}
		for v, err := range e.StreamJSON(ctx, runID, name, *from, *follow) {
			if err != nil {
				if *follow && ctx.Err() != nil && c.ctx.Err() == nil {
					return nil // Ctrl-C
				}
				return streamErr(err)
			}
			if err := c.printValue("", v); err != nil {
				return err
			}
		}
		return nil
	}
}

// printValue prints one value of a stream: "OFFSET  VALUE" (with the
// stream's name first when it is given), or a line of JSON.
func (c *call) printValue(stream string, v runtime.Streamed[[]byte]) error {
	if c.out.json {
		return c.out.line(jsonStreamValue{Stream: stream, Offset: v.Offset, Value: v.Value, WrittenAt: v.WrittenAt})
	}
	prefix := ""
	if stream != "" {
		prefix = clean(stream) + "  "
	}
	_, err := fmt.Fprintf(c.out.w, "%s%d  %s\n", prefix, v.Offset, jsonEscape(string(v.Value)))
	return err
}

// streamErr words a value that could not be read: one sealed with a key
// the command lacks says which.
func streamErr(err error) error {
	var se *runtime.SealedError
	if errors.As(err, &se) {
		note, _ := sealedNote(err, "")
		return fmt.Errorf("%s is sealed: %s", se.What, strings.TrimSuffix(strings.TrimPrefix(note, "(sealed: "), ")"))
	}
	return err
}

// noStream says the run has no stream name, naming those it has.
func (c *call) noStream(infos []storage.StreamInfo, name string, r runtime.RunInfo) error {
	names := make([]string, len(infos))
	for i, s := range infos {
		names[i] = s.Name
	}
	msg := fmt.Sprintf("the run has no stream %q", name)
	if best := nearest(name, names); best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	msg += fmt.Sprintf(" (its streams: %s)", listOrNone(names))
	if !r.Status.Finished() {
		msg += "; --follow waits for it"
	}
	return errors.New(msg)
}

// updatesShown is how many of a run's updates stem show lists: its
// latest.
const updatesShown = 20

// interactions are a run's updates (the latest updatesShown of them, of
// total) and streams, as stem show lists them.
type interactions struct {
	updates []storage.UpdateRecord
	total   int
	streams []storage.StreamInfo
}

// readInteractions reads the run's streams and its latest updates.
func readInteractions(ctx context.Context, e *runtime.Engine, runID string) (interactions, error) {
	var in interactions
	var err error
	if in.streams, err = e.Streams(ctx, runID); err != nil {
		return in, err
	}
	var after int64
	for {
		page, err := e.Updates(ctx, runID, after, storage.MaxUpdatesPage)
		if err != nil {
			return in, err
		}
		in.total += len(page)
		in.updates = append(in.updates, page...)
		if n := len(in.updates); n > updatesShown {
			in.updates = slices.Clone(in.updates[n-updatesShown:])
		}
		if len(page) < storage.MaxUpdatesPage {
			return in, nil
		}
		after = page[len(page)-1].Seq
	}
}

// printInteractions writes stem show's lists of the run's updates and
// streams, each when the run has some.
func printInteractions(w io.Writer, e *runtime.Engine, in interactions, run storage.RunStatus) error {
	if len(in.updates) > 0 {
		fmt.Fprintf(w, "\nupdates\n")
		if in.total > len(in.updates) {
			fmt.Fprintf(w, "  the latest %d of %d\n", len(in.updates), in.total)
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tID\tUPDATE\tSTATE\tREPLY")
		for _, u := range in.updates {
			_, rep, repErr, err := e.OpenUpdate(u)
			state, reply := updateState(u, run), result(rep, 60)
			switch {
			case repErr != nil:
				state, reply = "failed", "error: "+truncate(errNote(repErr, false), 80)
			case err != nil && u.State == storage.UpdateReplied:
				reply, _ = sealedNote(err, "")
			case state == "unhandled":
				reply = "never: the run ended without replying"
			case u.State == storage.UpdatePending:
				reply = "waiting for the run"
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", u.Seq, clean(u.ID), clean(u.Name), state, clean(reply))
		}
		tw.Flush()
	}
	if len(in.streams) > 0 {
		fmt.Fprintf(w, "\nstreams\n")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  STREAM\tLENGTH\tSTATE\tUPDATED")
		for _, s := range in.streams {
			state := "open"
			if s.Closed {
				state = "closed"
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", clean(s.Name), s.Length, state, stamp(s.UpdatedAt))
		}
		return tw.Flush()
	}
	return nil
}

// followRun is stem show --follow: it prints the new values of the run's
// streams, those it has and those it begins, as "STREAM  OFFSET  VALUE"
// (a line of JSON each with --json), until the run ends or Ctrl-C, then
// how it ended.
func (c *call) followRun(e *runtime.Engine, runID string, known []storage.StreamInfo) error {
	ctx, stop := signal.NotifyContext(context.WithoutCancel(c.ctx), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var (
		mu       sync.Mutex // serializes the output and failed
		failed   error
		wg       sync.WaitGroup
		followed = map[string]bool{}
	)
	read := func(name string, from int64) {
		defer wg.Done()
		for v, err := range e.StreamJSON(ctx, runID, name, from, true) {
			mu.Lock()
			if err == nil {
				err = c.printValue(name, v)
			} else if ctx.Err() == nil {
				err = streamErr(err)
			} else {
				err = nil
			}
			if err != nil && failed == nil {
				failed = err
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}
	start := func(infos []storage.StreamInfo, fromEnd bool) {
		for _, s := range infos {
			if followed[s.Name] {
				continue
			}
			followed[s.Name] = true
			from := int64(0)
			if fromEnd {
				from = s.Length
			}
			wg.Add(1)
			go read(s.Name, from)
		}
	}
	start(known, true)
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	var r runtime.RunInfo
	for {
		// A stream the run begins while it is followed is read from its
		// first value; the run's end ends every reader once it has read
		// the values written before it.
		infos, err := e.Streams(ctx, runID)
		if err == nil {
			start(infos, false)
			r, err = e.Get(ctx, runID)
		}
		switch {
		case ctx.Err() != nil:
			wg.Wait()
			return failed
		case err != nil:
			stop()
			wg.Wait()
			return err
		case r.Status.Finished():
			// Streams the run wrote last, with its end, are read too.
			if infos, err := e.Streams(ctx, runID); err == nil {
				start(infos, false)
			}
			wg.Wait()
			if failed != nil {
				return failed
			}
			if c.out.json {
				return c.out.line(struct {
					RunID  string `json:"run_id"`
					Status string `json:"status"`
				}{runID, string(r.Status)})
			}
			_, err := fmt.Fprintf(c.out.w, "run %s ended: %s\n", clean(runID), r.Status)
			return err
		}
		select {
		case <-ctx.Done():
		case <-poll.C:
		}
		mu.Lock()
		f := failed
		mu.Unlock()
		if f != nil {
			stop()
			wg.Wait()
			return f
		}
	}
}
