package enginetest

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stemflow/stem/runtime"
)

var deployScenarios = []scenario{
	{"deploy/changes over parked runs go on or hold, as the evolution table says", testDeploys},
	{"deploy/held runs can be paused, resumed, terminated and restarted, and a held child keeps its parent waiting", testHeldRunsAnswerOperators},
}

// shopCode is one build of the shop workflow: the baseline reserves and
// quotes, waits for an approval, waits for the shipment, and charges. Each
// field is a change a developer makes between deploys.
type shopCode struct {
	insertAudit bool // a step inserted before the approval wait
	dropReserve bool // the reserve step removed
	ifReserve   bool // the reserve step wrapped in an if that is false
	swap        bool // quote called before reserve
	notifyAfter bool // a step added after the last call runs recorded
	noteField   bool // a field added to the reservation
	qtyText     bool // the reservation's quantity made a string
	approverNum bool // the approval event's field made a number
}

// The reservation in its three shapes: the baseline's, with a field added,
// and with its field's type changed.
type (
	reservation     struct{ Qty int }
	reservationNote struct {
		Qty  int
		Note string
	}
	reservationText struct{ Qty string }
)

// The approval event in its two shapes.
type (
	shopApproval    struct{ By string }
	shopApprovalNum struct{ By int }
)

// shopOrder is the shop workflow's input; shopPrice the price a quote
// gives, so a complete run's charge is Qty * shopPrice.
type shopOrder struct{ Qty int }

const (
	shopPrice    = 7
	approveTopic = "shop.approve"
	shipTopic    = "shop.ship"
)

// registerShop registers build code of the shop workflow as name, at
// version (0: the default).
func registerShop(f *fixture, e *runtime.Engine, name string, version int, code shopCode) {
	var opts []runtime.RegisterOption
	if version > 0 {
		opts = append(opts, runtime.WorkflowVersion(version))
	}
	f.must(runtime.Register(e, name, func(c *runtime.WorkflowContext, in shopOrder) (int, error) {
		step := func(key string, out int) (int, error) {
			return runtime.Step(c, key, runtime.StepOptions{}, func(runtime.StepContext) (int, error) { return out, nil })
		}
		reserve := func() (int, error) {
			switch {
			case code.noteField:
				r, err := runtime.Step(c, "reserve@v1", runtime.StepOptions{}, func(runtime.StepContext) (reservationNote, error) {
					return reservationNote{Qty: in.Qty, Note: "new"}, nil
				})
				return r.Qty, err
			case code.qtyText:
				r, err := runtime.Step(c, "reserve@v1", runtime.StepOptions{}, func(runtime.StepContext) (reservationText, error) {
					return reservationText{Qty: fmt.Sprint(in.Qty)}, nil
				})
				var qty int
				fmt.Sscan(r.Qty, &qty)
				return qty, err
			}
			r, err := runtime.Step(c, "reserve@v1", runtime.StepOptions{}, func(runtime.StepContext) (reservation, error) {
				return reservation{Qty: in.Qty}, nil
			})
			return r.Qty, err
		}
		qty, price := in.Qty, 0
		var err error
		if code.swap {
			if price, err = step("quote@v1", shopPrice); err != nil {
				return 0, err
			}
		}
		switch {
		case code.dropReserve:
		case code.ifReserve && in.Qty > 1000:
			qty, err = reserve()
		case !code.ifReserve:
			qty, err = reserve()
		}
		if err != nil {
			return 0, err
		}
		if !code.swap {
			if price, err = step("quote@v1", shopPrice); err != nil {
				return 0, err
			}
		}
		if code.insertAudit {
			if _, err := step("audit@v1", 1); err != nil {
				return 0, err
			}
		}
		if code.approverNum {
			if _, err := runtime.WaitForEvent[shopApprovalNum](c, "approval", approveTopic, 0); err != nil {
				return 0, err
			}
		} else if _, err := runtime.WaitForEvent[shopApproval](c, "approval", approveTopic, 0); err != nil {
			return 0, err
		}
		if _, err := runtime.WaitForEvent[string](c, "ship", shipTopic, 0); err != nil {
			return 0, err
		}
		charged, err := step("charge@v1", qty*price)
		if err != nil || !code.notifyAfter {
			return charged, err
		}
		_, err = step("notify@v1", 1)
		return charged, err
	}, opts...))
}

// deployCase is one row of the evolution table: a change deployed over
// parked runs, and what the runs then do.
type deployCase struct {
	name string
	code shopCode
	// approved sends the runs' approvals before the deploy, so they park
	// at the shipment wait holding the approval's payload.
	approved bool
	// held is what every run's hold must name; none when the runs go on.
	held []string
	// fix, when set, is the build deployed next, which must take the held
	// runs up again and complete them: the old code kept as version 1.
	fix bool
}

// deployTable is the README's evolution table, row by row.
var deployTable = []deployCase{
	{name: "a field added", code: shopCode{noteField: true}},
	{name: "a step added after the last recorded call", code: shopCode{notifyAfter: true}},
	{name: "a field's type changed", code: shopCode{qtyText: true}, held: []string{"reserve@v1", "no longer decodes"}, fix: true},
	{name: "a step inserted before a park", code: shopCode{insertAudit: true}, held: []string{"audit@v1", "approval"}},
	{name: "a step removed", code: shopCode{dropReserve: true}, held: []string{"reserve@v1"}},
	{name: "a step wrapped in an if", code: shopCode{ifReserve: true}, held: []string{"reserve@v1"}},
	{name: "steps reordered", code: shopCode{swap: true}, held: []string{"quote@v1", "reserve@v1"}},
	{name: "an event's shape changed", code: shopCode{approverNum: true}, approved: true, held: []string{"approval", "no longer decodes"}},
}

// deployRuns is how many runs each change is deployed over.
const deployRuns = 20

// testDeploys parks deployRuns runs of the baseline build per row of the
// evolution table, deploys the row's change (the old engine stops, a new
// one starts), lets every run go on, and checks that each either
// completes with the right charge or is held naming its divergence —
// never completed with a wrong result, never errored. A row with a fix
// then deploys the old code again as version 1 beside the new as version
// 2, and the held runs complete on it with no operator's help. A renamed
// workflow's runs are left alone by every engine and reported by the
// replayer.
func testDeploys(f *fixture) {
	wf := func(c deployCase) string { return "shop." + strings.NewReplacer(" ", "-", "'", "").Replace(c.name) }
	id := func(c deployCase, i int) string { return fmt.Sprintf("%s-%02d", wf(c), i) }
	old := f.engine(config{}, func(e *runtime.Engine) {
		for _, c := range deployTable {
			registerShop(f, e, wf(c), 0, shopCode{})
		}
		registerShop(f, e, "shop.renamed", 0, shopCode{})
	})
	stopOld := f.start(old)
	for _, c := range deployTable {
		for i := range deployRuns {
			_, err := runtime.Start[shopOrder, int](f.ctx, old, wf(c), shopOrder{Qty: i + 1}, runtime.WithID(id(c, i)))
			f.must(err)
			if c.approved {
				f.must(old.SendEvent(f.ctx, id(c, i), approveTopic, shopApproval{By: "ann"}))
			}
		}
	}
	for i := range deployRuns {
		_, err := runtime.Start[shopOrder, int](f.ctx, old, "shop.renamed", shopOrder{Qty: i + 1}, runtime.WithID(fmt.Sprintf("renamed-%02d", i)))
		f.must(err)
	}
	parkedAt := func(c deployCase) string {
		if c.approved {
			return shipTopic
		}
		return approveTopic
	}
	for _, c := range deployTable {
		for i := range deployRuns {
			f.eventually(id(c, i)+" parks", func() bool {
				info := f.info(old, id(c, i))
				return info.Status == runtime.StatusWaiting && info.WaitingFor == parkedAt(c)
			})
		}
	}
	for i := range deployRuns {
		f.eventually(fmt.Sprintf("renamed-%02d parks", i), func() bool {
			info := f.info(old, fmt.Sprintf("renamed-%02d", i))
			return info.Status == runtime.StatusWaiting && info.WaitingFor == approveTopic
		})
	}
	stopOld()

	// The deploy: a new build, which looks at held runs again each second.
	deployed := f.engine(config{holdRetry: time.Second}, func(e *runtime.Engine) {
		for _, c := range deployTable {
			registerShop(f, e, wf(c), 0, c.code)
		}
		registerShop(f, e, "shop.renamed-to", 0, shopCode{})
	})
	stopDeployed := f.start(deployed)
	for _, c := range deployTable {
		for i := range deployRuns {
			if !c.approved {
				f.must(deployed.SendEvent(f.ctx, id(c, i), approveTopic, shopApproval{By: "bob"}))
			}
			f.must(deployed.SendEvent(f.ctx, id(c, i), shipTopic, "T-1"))
		}
	}
	for _, c := range deployTable {
		for i := range deployRuns {
			var info runtime.RunInfo
			f.eventually(id(c, i)+" completes or is held", func() bool {
				info = f.info(deployed, id(c, i))
				return info.Status.Finished() || info.Hold != nil
			})
			switch {
			case len(c.held) == 0 && info.Status != runtime.StatusComplete:
				f.t.Errorf("%s: run %s is %s (hold %+v, err %v), want complete", c.name, info.ID, info.Status, info.Hold, info.Err)
			case len(c.held) == 0:
				wantCharge(f, c, info, i)
			case info.Status.Finished():
				f.t.Errorf("%s: run %s is %s (output %s, err %v), want it held", c.name, info.ID, info.Status, info.Output, info.Err)
			default:
				for _, s := range c.held {
					if !strings.Contains(info.Hold.Reason+" "+info.Hold.Recorded+" "+info.Hold.Called, s) {
						f.t.Errorf("%s: run %s held with %+v, want it to name %q", c.name, info.ID, *info.Hold, s)
					}
				}
			}
		}
	}
	for i := range deployRuns {
		if info := f.info(deployed, fmt.Sprintf("renamed-%02d", i)); info.Status != runtime.StatusWaiting {
			f.t.Errorf("a run of the renamed workflow is %s, want it left waiting", info.Status)
		}
	}
	us, err := deployed.Unserved(f.ctx)
	f.must(err)
	if len(us) != 1 || us[0].Workflow != "shop.renamed" || us[0].Total != deployRuns {
		f.t.Errorf("Unserved = %+v, want the %d runs of shop.renamed, which no engine registers now", us, deployRuns)
	}
	rep, err := deployed.Replay(f.ctx, runtime.ReplayOptions{})
	f.must(err)
	unregistered := 0
	for _, d := range rep.Divergences {
		if d.Workflow == "shop.renamed" && strings.Contains(d.Message, "not registered") {
			unregistered++
		}
	}
	if unregistered != deployRuns {
		f.t.Errorf("the replayer reported %d runs of the renamed workflow as unregistered, want %d: %v", unregistered, deployRuns, rep.Divergences)
	}
	stopDeployed()

	// The fix: the old code kept as version 1, the new as version 2.
	fixed := f.engine(config{}, func(e *runtime.Engine) {
		for _, c := range deployTable {
			if c.fix {
				registerShop(f, e, wf(c), 1, shopCode{})
				registerShop(f, e, wf(c), 2, c.code)
			}
		}
	})
	f.start(fixed)
	for _, c := range deployTable {
		if !c.fix {
			continue
		}
		for i := range deployRuns {
			info := f.waitStatus(fixed, id(c, i), runtime.StatusComplete)
			wantCharge(f, c, info, i)
			if info.Hold != nil {
				f.t.Errorf("%s: run %s completed but is still held: %+v", c.name, info.ID, *info.Hold)
			}
		}
	}
}

// wantCharge checks a complete run's charge: Qty * shopPrice for run i.
func wantCharge(f *fixture, c deployCase, info runtime.RunInfo, i int) {
	f.t.Helper()
	var got int
	if err := jsonInt(info.Output, &got); err != nil || got != (i+1)*shopPrice {
		f.t.Errorf("%s: run %s charged %s (%v), want %d", c.name, info.ID, info.Output, err, (i+1)*shopPrice)
	}
}

// jsonInt decodes a JSON number.
func jsonInt(b []byte, v *int) error {
	if _, err := fmt.Sscan(string(b), v); err != nil {
		return errors.New("not a number: " + string(b))
	}
	return nil
}

// testHeldRunsAnswerOperators: a held run can still be paused and
// resumed (and is held again while the code still diverges), terminated,
// and restarted from the top on the new code; a held child keeps its
// parent waiting until a build that matches the child's history deploys,
// and then both complete.
func testHeldRunsAnswerOperators(f *fixture) {
	registerParent := func(e *runtime.Engine) {
		f.must(runtime.Register(e, "shop.parent", func(c *runtime.WorkflowContext, in shopOrder) (int, error) {
			return runtime.CallChild[int](c, "order", "shop.held", in)
		}))
	}
	old := f.engine(config{}, func(e *runtime.Engine) {
		registerShop(f, e, "shop.held", 0, shopCode{})
		registerParent(e)
	})
	stopOld := f.start(old)
	ids := []string{"paused", "terminated", "restarted"}
	for i, id := range ids {
		_, err := runtime.Start[shopOrder, int](f.ctx, old, "shop.held", shopOrder{Qty: i + 1}, runtime.WithID(id))
		f.must(err)
	}
	_, err := runtime.Start[shopOrder, int](f.ctx, old, "shop.parent", shopOrder{Qty: 5}, runtime.WithID("parent"))
	f.must(err)
	child := ""
	f.eventually("the parent's child parks", func() bool {
		runs, _, err := old.ListRuns(f.ctx, runtime.ListRunsQuery{ParentID: "parent"})
		f.must(err)
		if len(runs) == 1 && runs[0].Status == runtime.StatusWaiting {
			child = runs[0].ID
			return true
		}
		return false
	})
	for _, id := range ids {
		f.waitStatus(old, id, runtime.StatusWaiting)
	}
	stopOld()

	deployed := f.engine(config{holdRetry: 200 * time.Millisecond}, func(e *runtime.Engine) {
		registerShop(f, e, "shop.held", 0, shopCode{insertAudit: true})
		registerParent(e)
	})
	stopDeployed := f.start(deployed)
	for _, id := range append(ids, child) {
		f.must(deployed.SendEvent(f.ctx, id, approveTopic, shopApproval{By: "bob"}))
		f.must(deployed.SendEvent(f.ctx, id, shipTopic, "T-1"))
	}
	held := func(id string) {
		f.t.Helper()
		f.eventually(id+" is held", func() bool {
			info := f.info(deployed, id)
			return info.Hold != nil && !info.Status.Finished()
		})
	}
	for _, id := range append(ids, child) {
		held(id)
	}
	f.must(deployed.Pause(f.ctx, "paused"))
	f.waitStatus(deployed, "paused", runtime.StatusPaused)
	f.must(deployed.Resume(f.ctx, "paused"))
	f.eventually("the resumed run was claimed and held again", func() bool {
		info := f.info(deployed, "paused")
		return info.Hold != nil && info.Status == runtime.StatusWaiting
	})
	f.must(deployed.Terminate(f.ctx, "terminated", "the deploy broke it"))
	f.waitStatus(deployed, "terminated", runtime.StatusTerminated)
	f.must(deployed.Restart(f.ctx, "restarted"))
	if info := f.waitStatus(deployed, "restarted", runtime.StatusWaiting); info.Execution != 2 {
		f.t.Fatalf("restarted run in execution %d, want 2", info.Execution)
	}
	// The restart runs the new code from the top: it waits for its
	// approval again, and completes, taking the shipping event still
	// buffered from before the restart (buffered events outlive it).
	f.must(deployed.SendEvent(f.ctx, "restarted", approveTopic, shopApproval{By: "bob"}))
	if info := f.waitStatus(deployed, "restarted", runtime.StatusComplete); info.Hold != nil {
		f.t.Fatalf("restarted run completed still held: %+v", *info.Hold)
	}
	if info := f.info(deployed, "parent"); info.Status != runtime.StatusWaiting {
		f.t.Fatalf("the held child's parent is %s, want waiting", info.Status)
	}
	stopDeployed()

	// A build that matches the child's history again: child and parent
	// complete, with no operator's help.
	fixed := f.engine(config{}, func(e *runtime.Engine) {
		registerShop(f, e, "shop.held", 0, shopCode{})
		registerParent(e)
	})
	f.start(fixed)
	f.waitStatus(fixed, child, runtime.StatusComplete)
	info := f.waitStatus(fixed, "parent", runtime.StatusComplete)
	var got int
	if err := jsonInt(info.Output, &got); err != nil || got != 5*shopPrice {
		f.t.Fatalf("parent output %s, want %d", info.Output, 5*shopPrice)
	}
}
