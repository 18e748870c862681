package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stemflow/stem/internal/loadgen"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/storage"
)

// stem bench --processes P works the runs in P worker processes: this
// program started again as `stem bench-worker`, a command no list shows,
// on the same store. A worker prints workerReady on its standard output
// once its engine works, and works until its standard input closes: when
// the bench stops it, or when the bench process exits however it exits,
// so no worker outlives it.

// workerReady is the line a worker process prints once it works.
const workerReady = "ready"

// stopWait bounds how long a worker process may take to exit once its
// input closed; then it is killed.
const stopWait = 10 * time.Second

// workerCommand is the command a worker process runs. lookup finds it,
// but usage and the suggestions for a mistyped command never name it.
var workerCommand = &command{
	name: "bench-worker", max: 0, setup: benchWorker, timeout: time.Hour,
	args:    "[--concurrency C]",
	summary: "a worker process of stem bench --processes",
	detail: `Works the runs of stem bench's workflows (stembench.steps, stembench.sleep)
on the store with an engine of --concurrency workers, prints "` + workerReady + `" once it
works, and works until its standard input closes. stem bench --processes
starts it; there is no other use for it.`,
}

// benchWorker is the worker process's command.
func benchWorker(fs *flag.FlagSet) func(*call, []string) error {
	conc := fs.Int("concurrency", 32, "`C` workers of the engine")
	poll := fs.Duration("poll", 0, "the engine's poll interval (`D`; 0: its default)")
	return func(c *call, _ []string) error {
		if *conc < 1 {
			return usagef("--concurrency %d: want 1 or more", *conc)
		}
		if _, err := c.open(); err != nil {
			return err
		}
		e, err := runtime.New(runtime.Config{Store: c.store, Workers: *conc, PollInterval: *poll, Codec: c.codec, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		defer e.Close()
		if err := loadgen.Register(e); err != nil {
			return err
		}
		ctx, stop := context.WithCancel(c.ctx)
		defer stop()
		if f, ok := c.store.(storage.FinishNotifier); ok {
			// The first subscription returns once the store hears other
			// processes' writes (Postgres's LISTEN connection, Redis's
			// subscription), so the runs the bench starts once every
			// worker is ready wake this one at once, not at its next poll.
			sub, unsubscribe := context.WithCancel(ctx)
			f.Finished(sub)
			unsubscribe()
		}
		ran := make(chan error, 1)
		go func() { ran <- e.Run(ctx) }()
		if _, err := fmt.Fprintln(c.out.w, workerReady); err != nil {
			return err
		}
		go func() {
			io.Copy(io.Discard, c.in)
			stop()
		}()
		err = <-ran
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			// Stopped as asked, while Run was still starting (it reads
			// the catalog first): not a failure of the worker.
			return nil
		}
		return err
	}
}

// workerProcs are stem bench's worker processes.
type workerProcs struct {
	procs []*workerProc
	// cancel ends the workloads' context, with a *workerExit as the cause
	// when a process exited before it was stopped.
	cancel context.CancelCauseFunc
	// stopping is set once the bench stops or kills the processes: their
	// exit is expected from then on.
	stopping atomic.Bool
}

// workerProc is one worker process.
type workerProc struct {
	n     int // from 1, as messages name it
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// stderr is what the process wrote there: its error, if it failed.
	// It is read once the process has been waited for.
	stderr bytes.Buffer
	// ready receives once: nil when the process printed workerReady, else
	// why it never will.
	ready chan error
	// exited is closed once the process has exited and been waited for;
	// err is then what Wait returned.
	exited chan struct{}
	err    error
}

// workerExit is a worker process that exited before the bench stopped it.
type workerExit struct{ msg string }

func (e *workerExit) Error() string { return e.msg }

// startWorkerProcs starts n worker processes of conc workers each on the
// store and waits until every one works, at most the command timeout; on
// any failure it kills those it started.
func startWorkerProcs(c *call, n, conc int, poll time.Duration) (*benchWorkers, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("worker processes: cannot find this program to start it again: %w", err)
	}
	// The store and a key go by the environment, not the command line,
	// which other users of the machine can read.
	env := append(os.Environ(), "STEM_STORE="+c.g.storeURL())
	var args []string
	switch {
	case c.g.codecKey != "":
		env = append(env, "STEM_CODEC_KEY="+c.g.codecKey)
	case c.g.codecKeyFile != "":
		args = append(args, "--codec-key-file", c.g.codecKeyFile)
	}
	args = append(args, workerCommand.name, "--concurrency", strconv.Itoa(conc), "--poll", poll.String())

	ctx, cancel := context.WithCancelCause(c.ctx)
	wp := &workerProcs{cancel: cancel}
	for i := range n {
		if err := wp.start(exe, args, env, i+1); err != nil {
			wp.kill()
			return nil, err
		}
	}
	wait := time.NewTimer(timeout)
	defer wait.Stop()
	for _, p := range wp.procs {
		select {
		case err = <-p.ready:
		case <-wait.C:
			err = fmt.Errorf("worker process %d (pid %d) not ready within %v", p.n, p.cmd.Process.Pid, timeout)
		case <-c.ctx.Done():
			err = c.ctx.Err()
		}
		if err != nil {
			wp.kill()
			return nil, err
		}
	}
	return &benchWorkers{client: c.engine, ctx: ctx, stop: wp.stop, kill: wp.kill}, nil
}

// start starts worker process n.
func (wp *workerProcs) start(exe string, args, env []string, n int) error {
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	p := &workerProc{n: n, cmd: cmd, ready: make(chan error, 1), exited: make(chan struct{})}
	cmd.Stderr = &p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("start worker process %d: %w", n, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("start worker process %d: %w", n, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start worker process %d (%s): %w", n, exe, err)
	}
	p.stdin = stdin
	wp.procs = append(wp.procs, p)
	go wp.watch(p, stdout)
	return nil
}

// watch reads the process's ready line, then waits for it to exit; an exit
// before it was ready, or before the bench stopped it, is reported.
func (wp *workerProcs) watch(p *workerProc, stdout io.Reader) {
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	ready := strings.TrimSpace(line) == workerReady
	if ready {
		p.ready <- nil
	}
	p.err = p.cmd.Wait()
	close(p.exited)
	switch {
	case !ready:
		p.ready <- fmt.Errorf("worker process %d (pid %d) exited before it was ready: %s", p.n, p.cmd.Process.Pid, p.failure())
	case !wp.stopping.Load():
		wp.cancel(&workerExit{fmt.Sprintf("worker process %d (pid %d) exited during the bench: %s", p.n, p.cmd.Process.Pid, p.failure())})
	}
}

// failure says how the process ended: its exit status and the last line
// it wrote on its standard error.
func (p *workerProc) failure() string {
	msg := "exit status 0"
	if p.err != nil {
		msg = p.err.Error()
	}
	lines := strings.Split(strings.TrimSpace(p.stderr.String()), "\n")
	if last := lines[len(lines)-1]; last != "" {
		msg += ": " + oneLine(last)
	}
	return msg
}

// stop closes every process's input, which ends it, and waits for them to
// exit; one still there after stopWait is killed. It returns how any of
// them failed.
func (wp *workerProcs) stop() error {
	wp.stopping.Store(true)
	defer wp.cancel(nil)
	for _, p := range wp.procs {
		p.stdin.Close()
	}
	deadline := time.Now().Add(stopWait)
	var errs []error
	for _, p := range wp.procs {
		wait := time.NewTimer(time.Until(deadline))
		select {
		case <-p.exited:
		case <-wait.C:
		}
		wait.Stop()
		select {
		case <-p.exited:
			if p.err != nil {
				errs = append(errs, fmt.Errorf("worker process %d (pid %d): %s", p.n, p.cmd.Process.Pid, p.failure()))
			}
		default:
			p.cmd.Process.Kill()
			<-p.exited
			errs = append(errs, fmt.Errorf("worker process %d (pid %d) had not exited %v after its input closed: killed", p.n, p.cmd.Process.Pid, stopWait))
		}
	}
	return errors.Join(errs...)
}

// kill kills every process and waits for them to exit.
func (wp *workerProcs) kill() {
	wp.stopping.Store(true)
	defer wp.cancel(nil)
	for _, p := range wp.procs {
		p.cmd.Process.Kill()
	}
	for _, p := range wp.procs {
		<-p.exited
	}
}
