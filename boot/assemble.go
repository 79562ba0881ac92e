package boot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"gompi/frameworks"
	"gompi/frameworks/btl"
	"gompi/frameworks/coll"
	"gompi/frameworks/crcp"
	"gompi/frameworks/crs"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/filem"
	"gompi/frameworks/inc"
	"gompi/frameworks/plm"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/mca"
)

// This file is where each process role selects and wires its modules:
// gompirun (AssembleHNP), gompid (AssembleDaemon) and a rank
// (AssembleApp). Each returns a typed set of selected, provisioned
// modules with one Close; rte/hnp, rte/daemon, mpi and cr consume it and
// select nothing themselves. The life of a module (Query, Provision,
// Close) is described in package mca's doc. Roles is the same wiring as a
// table, which gompi-info --role prints; a test holds each Assemble
// function to it.

// Part is one framework a role selects, and how it is wired.
type Part struct {
	Framework string `json:"framework"`
	// Select is how many modules are kept: "one", "stack" (every
	// available one, in priority order), or "one, when ..." for a part
	// selected only when another needs it.
	Select string `json:"select"`
	// Host is what the modules are provisioned with, and by whom ("" when
	// they take none).
	Host string `json:"host,omitempty"`
}

// Roles is what each process role selects, in the order it selects it.
// A tool selects only what a command needs (a FileM for a remote
// snapshot reference, Process.MetaStore), so it has no row.
var Roles = map[mca.Role][]Part{
	mca.RoleHNP: {
		{Framework: plm.Name, Select: "one"},
		{Framework: errmgr.Name, Select: "stack", Host: "errmgr.Host (the job's run), by gompirun before each run of the job"},
		{Framework: snapc.Name, Select: "one", Host: "a coordinating module starts each run's global coordinator (snapc.Coordinator.NewGlobal)"},
		{Framework: crs.Name, Select: "one, as a rank would, or, for a program that does not import package cr when the selection leaves the choice, the best that saves ranks from outside (criu); its name travels in the job's settings so every rank uses the same CRS"},
	},
	mca.RoleDaemon: {
		{Framework: sstore.Name, Select: "one", Host: "sstore.Host (node, FileM), by the assembly"},
		{Framework: filem.Name, Select: "one, when the sstore module takes a host"},
		{Framework: snapc.Name, Select: "one", Host: "a coordinating module starts the node's local coordinator per launch (snapc.Coordinator.NewLocal)"},
		{Framework: crs.Name, Select: "one (the job's, from its settings, as a rank selects it), kept with why when none", Host: "crs.Host with the node (crs.DaemonHost), by the assembly, when the module restores processes itself (crs.Restorer)"},
	},
	mca.RoleApp: {
		{Framework: btl.Name, Select: "stack, in a job of more than one rank"},
		{Framework: coll.Name, Select: "stack (none: package mpi runs the flat algorithms itself)"},
		{Framework: crcp.Name, Select: "one (none installs nothing)"},
		{Framework: inc.Name, Select: "one"},
		{Framework: crs.Name, Select: "one (the job's, from its settings)", Host: "crs.Host with the rank's state (crs.RankHost), by package cr when the program first asks for checkpoints"},
	},
}

// HNP is what gompirun selects.
type HNP struct {
	PLM mca.Candidate[plm.Module]
	// ErrMgr is the stack of fault policies; gompirun provisions it with
	// each run of the job (errmgr.Stack.Provision).
	ErrMgr *errmgr.Stack
	// SnapC is the job's coordinator; when it implements
	// snapc.Coordinator, each run starts its global coordinator from it.
	SnapC mca.Candidate[snapc.Module]
	// CRS is the CRS every rank of the job uses ("" when none would
	// answer: the ranks then fail to select one, each saying why).
	CRS string
	// CRSFromOutside says the job's CRS saves ranks from outside them (a
	// crs.Restorer, such as criu): the job's checkpoints dump every rank
	// wherever it is, with no safe point.
	CRSFromOutside bool

	closers mca.Closers
}

// AssembleHNP selects gompirun's modules. program is the resolved path of the program the job runs ("" when not
// known): it decides the job's CRS when the selection leaves the choice.
func AssembleHNP(ctx context.Context, p *Process, program string) (h *HNP, err error) {
	r := newRecorder(mca.RoleHNP)
	h = &HNP{}
	built := h // what to close when a later step fails
	defer func() {
		if err != nil {
			built.Close()
		}
	}()
	if h.PLM, err = selectOne(ctx, r, p, p.Frameworks.PLM); err != nil {
		return nil, fmt.Errorf("choose how to start daemons: %w", err)
	}
	h.closers.Module("plm/"+h.PLM.Info.Name, h.PLM.Module)
	r.add(errmgr.Name)
	cands, err := p.Frameworks.ErrMgr.Select(ctx, p.Values, mca.RoleHNP, p.FrameworkLogger(errmgr.Name))
	switch {
	case errors.Is(err, mca.ErrNoComponent):
		// The stack's own fallback aborts on every fault, as default would.
		h.ErrMgr = errmgr.NewStack(nil)
	case err != nil:
		return nil, fmt.Errorf("choose the error policies: %w", err)
	default:
		h.ErrMgr = errmgr.FromCandidates(cands)
		for _, c := range cands {
			h.closers.Module("errmgr/"+c.Info.Name, c.Module)
		}
	}
	if h.SnapC, err = selectOne(ctx, r, p, p.Frameworks.SnapC); err != nil {
		return nil, fmt.Errorf("choose the snapshot coordinator: %w", err)
	}
	h.closers.Module("snapc/"+h.SnapC.Info.Name, h.SnapC.Module)
	if h.CRS, h.CRSFromOutside, err = jobCRS(ctx, r, p, program); err != nil {
		return nil, fmt.Errorf("choose the job's CRS: %w", err)
	}
	r.done()
	return h, nil
}

// jobCRS is the CRS a rank of this job would select, chosen here, as a
// rank chooses it, once for the whole job so that every rank uses the
// same one; and whether it saves ranks from outside (a crs.Restorer).
// The module itself runs in the ranks or the daemons, never here: it is
// closed at once. When the crs parameter was set (not defaulted) and
// nothing it names can be used, the job is refused with each one's
// reason (criu: not root, no usable CRIU...), rather than started with
// ranks that cannot be saved. When the selection leaves the choice to
// gompi (-am ft-enable-cr's empty crs), the program decides
// (outsideForProgram).
func jobCRS(ctx context.Context, r *recorder, p *Process, program string) (string, bool, error) {
	r.add(crs.Name)
	// One query gives the rank's choice and, when there is none, why.
	cands, probes, err := p.Frameworks.CRS.Candidates(ctx, p.Values, mca.RoleApp, p.FrameworkLogger(crs.Name))
	if err != nil {
		set := p.Values.Get(crs.Name)
		if !set.Origin.Source.Explicit() {
			return "", false, nil
		}
		return "", false, fmt.Errorf("crs = %q (%s): %w%s; gompi-info --mca crs %s says more", set.Value, set.Origin, err, joinWhy(probeReasons(probes)), set.Value)
	}
	defer func() {
		for _, c := range cands {
			_ = mca.Close(c.Module)
		}
	}()
	c := cands[0]
	if o, ok := outsideForProgram(ctx, p, c, program); ok {
		defer func() { _ = mca.Close(o.Module) }()
		c = o
	}
	_, outside := c.Module.(crs.Restorer)
	return c.Info.Name, outside, nil
}

// outsideForProgram returns the CRS that saves processes from outside
// (criu) for a program with no C/R code of gompi's, when the selection
// leaves the choice and C/R is on. A program linking package cr keeps the
// rank's choice (self: its registered state at its safe points, small and
// portable); any other program has nothing self could save, so it gets
// the best CRS that saves from outside and is never refused a checkpoint
// where one can be taken. Such a CRS runs in daemons, never in a rank
// (criu answers a rank's query only when named), so it is asked as
// gompirun. Where none can be used, gompirun says so once, with why, and
// the job runs with the rank's choice.
func outsideForProgram(ctx context.Context, p *Process, best mca.Candidate[crs.Module], program string) (mca.Candidate[crs.Module], bool) {
	log := p.FrameworkLogger(crs.Name)
	sel, err := mca.ParseSelector(p.Values.String(crs.Name))
	if _, outside := best.Module.(crs.Restorer); outside || err != nil || (!sel.Exclude && len(sel.Names) == 1) ||
		program == "" || !p.Values.Bool(mca.ParamCREnabled) {
		return best, false // nothing to choose, or C/R off: no need to read the program
	}
	uses, err := programUsesCR(program)
	if err != nil {
		log.Debug("the program's C/R code is not known; the CRS is chosen by priority", "err", err)
		return best, false
	}
	if uses {
		return best, false
	}
	cands, probes, _ := p.Frameworks.CRS.Candidates(ctx, p.Values, mca.RoleHNP, log)
	var chosen *mca.Candidate[crs.Module]
	for i, c := range cands {
		if _, ok := c.Module.(crs.Restorer); ok && chosen == nil {
			chosen = &cands[i]
			continue
		}
		_ = mca.Close(c.Module)
	}
	if chosen != nil {
		log.Debug("the program does not import "+crPackage+": its ranks are saved from outside", "crs", chosen.Info.Name)
		return *chosen, true
	}
	probes = slices.DeleteFunc(probes, func(pr mca.Probe) bool { return pr.Info.Name == best.Info.Name }) // it answers a rank, not gompirun
	log.Warn("the program does not import "+crPackage+" and no CRS that saves unmodified programs can be used here"+joinWhy(probeReasons(probes))+
		": unless it saves its own state, its checkpoints will be refused; run as root with CRIU >= 4.2 (gompi-info --mca crs criu says more), or save its state with package cr",
		"program", program, "crs", best.Info.Name)
	return best, false
}

// probeReasons lists why each component that was considered could not be
// used.
func probeReasons(probes []mca.Probe) []string {
	var why []string
	for _, pr := range probes {
		if reason := pr.Skipped + pr.Failed; reason != "" && !pr.Excluded {
			why = append(why, pr.Info.Name+": "+reason)
		}
	}
	return why
}

func joinWhy(why []string) string {
	if len(why) == 0 {
		return ""
	}
	return " (" + strings.Join(why, "; ") + ")"
}

// JobSettings returns the settings gompirun sends its daemons (and they
// their ranks): all of vals, with the crs selector replaced by the CRS
// chosen for the job.
func (h *HNP) JobSettings(vals *mca.Values) []mca.Setting {
	all := vals.All()
	if h.CRS == "" {
		return all
	}
	for i, s := range all {
		if s.Name == crs.Name {
			all[i] = mca.Setting{Name: crs.Name, Value: h.CRS, Origin: mca.Origin{Source: s.Origin.Source, Where: "chosen by gompirun for the job"}}
		}
	}
	return all
}

// Close closes every module gompirun selected.
func (h *HNP) Close() error { return h.closers.Close() }

// Daemon is what gompid selects.
type Daemon struct {
	// SStore is the node's stable storage, provisioned with the node (and
	// FileM, when it takes a host).
	SStore mca.Candidate[sstore.Module]
	// FileM is set when SStore takes a host: it moves the node's snapshots.
	FileM *mca.Candidate[filem.Module]
	// SnapC is the job's coordinator; when it implements
	// snapc.Coordinator, each launch starts the node's local coordinator
	// from it.
	SnapC mca.Candidate[snapc.Module]
	// CRS is the job's CRS, through which the daemon restarts its ranks:
	// a crs.Restorer brings a rank back itself (provisioned with the
	// node), any other module's Restart says what to launch. CRSErr says
	// why there is none (the daemon then cannot restart a rank); it does
	// not stop the daemon, whose job may never restart.
	CRS    mca.Candidate[crs.Module]
	CRSErr error

	closers mca.Closers
}

// AssembleDaemon selects and provisions gompid's modules for node.
func AssembleDaemon(ctx context.Context, p *Process, node string) (d *Daemon, err error) {
	r := newRecorder(mca.RoleDaemon)
	d = &Daemon{}
	built := d // what to close when a later step fails
	defer func() {
		if err != nil {
			built.Close()
		}
	}()
	if d.SStore, err = selectOne(ctx, r, p, p.Frameworks.SStore); err != nil {
		return nil, fmt.Errorf("gompid: choose the stable storage: %w", err)
	}
	d.closers.Module("sstore/"+d.SStore.Info.Name, d.SStore.Module)
	r.add(filem.Name)
	if _, ok := d.SStore.Module.(mca.Provisioner[sstore.Host]); ok {
		fm, err := selectOne(ctx, nil, p, p.Frameworks.FileM)
		if err != nil {
			return nil, fmt.Errorf("gompid: choose the file mover for sstore %s: %w", d.SStore.Info.Name, err)
		}
		d.FileM = &fm
		// Closed after SStore (last first): its drains use FileM.
		d.closers.Module("filem/"+fm.Info.Name, fm.Module)
		host := sstore.Host{Node: node, FileM: fm.Module, Log: p.FrameworkLogger(sstore.Name)}
		if _, err := mca.Provision(ctx, d.SStore.Module, host); err != nil {
			return nil, fmt.Errorf("gompid: sstore %s: %w", d.SStore.Info.Name, err)
		}
	}
	if d.SnapC, err = selectOne(ctx, r, p, p.Frameworks.SnapC); err != nil {
		return nil, fmt.Errorf("gompid: choose the snapshot coordinator: %w", err)
	}
	d.closers.Module("snapc/"+d.SnapC.Info.Name, d.SnapC.Module)
	d.CRS, d.CRSErr = daemonCRS(ctx, r, p, node)
	if d.CRSErr == nil {
		d.closers.Module("crs/"+d.CRS.Info.Name, d.CRS.Module)
	}
	r.done()
	return d, nil
}

// daemonCRS selects the job's CRS in gompid. It is selected as a rank
// selects it (mca.RoleApp): the job's settings name the one gompirun
// chose for its ranks, and the daemon restarts them through the same.
// A module that restores processes itself is provisioned with the node;
// the others run in the rank and are not provisioned here.
func daemonCRS(ctx context.Context, r *recorder, p *Process, node string) (mca.Candidate[crs.Module], error) {
	r.add(crs.Name)
	fw := p.Frameworks.CRS
	c, err := fw.SelectOne(ctx, p.Values, mca.RoleApp, p.FrameworkLogger(crs.Name))
	if err != nil {
		return c, fmt.Errorf("gompid: choose the job's CRS: %w", err)
	}
	if _, ok := c.Module.(crs.Restorer); ok {
		host := crs.Host{Daemon: &crs.DaemonHost{Node: node}, Log: p.FrameworkLogger(crs.Name)}
		if _, err := mca.Provision(ctx, c.Module, host); err != nil {
			_ = mca.Close(c.Module)
			return mca.Candidate[crs.Module]{}, fmt.Errorf("gompid: crs %s: %w", c.Info.Name, err)
		}
	}
	return c, nil
}

// Close closes every module gompid selected.
func (d *Daemon) Close() error { return d.closers.Close() }

// App is what a rank selects. Unlike the daemon's and gompirun's, its
// selection reads the registries and values its bootstrap gives
// (mpi.Bootstrap), which in tests are not a Process.
type App struct {
	// BTL are the transports, best first (nil in a job of one rank).
	BTL []mca.Candidate[btl.Module]
	// Coll are the collective modules, best first (nil when the selection
	// leaves none: package mpi then runs the flat algorithms itself).
	Coll []mca.Candidate[coll.Module]
	// CRCP is the coordination protocol; nil with crcp none (or when the
	// registries hold no crcp framework), which installs nothing.
	CRCP *mca.Candidate[crcp.Module]
	// INC is the rank's callback stack, or why none could be selected
	// (INCErr): package cr needs it only once the program asks for
	// checkpoints, and reports INCErr then.
	INC    mca.Candidate[inc.Module]
	INCErr error
	// CRS is the job's CRS, or why the rank has none (CRSErr: the rank
	// cannot be checkpointed, and says why when asked). Package cr
	// provisions it with the rank's state (crs.RankHost).
	CRS    mca.Candidate[crs.Module]
	CRSErr error

	closers mca.Closers
}

var errNoRegistries = errors.New("the runtime gave no framework registries or parameters")

// AppInput is what a rank's assembly reads.
type AppInput struct {
	Set    *frameworks.Set
	Values *mca.Values
	// Size is the job's rank count: a job of one rank opens no transport.
	Size int
	// Log is the rank's log handler; each framework logs through it at
	// its own <framework>_base_verbose level.
	Log slog.Handler
}

// AssembleApp selects a rank's modules. Its errors are selection errors
// of btl, coll and crcp, which end the rank's start; inc's and crs's are
// kept in the set for package cr to report.
func AssembleApp(ctx context.Context, in AppInput) (a *App, err error) {
	r := newRecorder(mca.RoleApp)
	a = &App{}
	built := a // what to close when a later step fails
	defer func() {
		if err != nil {
			built.Close()
		}
	}()
	set, vals := in.Set, in.Values
	if set == nil || vals == nil {
		// A rank alone needs no module to run; it cannot be checkpointed.
		if in.Size > 1 {
			return nil, errors.New("the runtime gave no btl framework; the bootstrap's Frameworks() must hold the btl components")
		}
		a.INCErr = errNoRegistries
		a.CRSErr = errNoRegistries
		return a, nil
	}
	r.add(btl.Name)
	if in.Size > 1 {
		if set.BTL == nil {
			return nil, errors.New("the runtime gave no btl framework; the bootstrap's Frameworks() must hold the btl components")
		}
		if a.BTL, err = set.BTL.Select(ctx, vals, mca.RoleApp, set.BTL.Logger(in.Log, vals)); err != nil {
			return nil, fmt.Errorf("select transports: %w", err)
		}
		for _, c := range a.BTL {
			a.closers.Module("btl/"+c.Info.Name, c.Module)
		}
	}
	r.add(coll.Name)
	if set.Coll != nil {
		a.Coll, err = set.Coll.Select(ctx, vals, mca.RoleApp, set.Coll.Logger(in.Log, vals))
		switch {
		case errors.Is(err, mca.ErrNoComponent):
			a.Coll = nil
		case err != nil:
			return nil, fmt.Errorf("select the collective components (coll = %q): %w", vals.String(coll.Name), err)
		}
		for _, c := range a.Coll {
			a.closers.Module("coll/"+c.Info.Name, c.Module)
		}
	}
	r.add(crcp.Name)
	if set.CRCP != nil {
		c, err := set.CRCP.SelectOne(ctx, vals, mca.RoleApp, set.CRCP.Logger(in.Log, vals))
		switch {
		case errors.Is(err, mca.ErrNoComponent) && vals.String(crcp.Name) == "":
		case err != nil:
			return nil, fmt.Errorf("select the coordination protocol (crcp = %q): %w", vals.String(crcp.Name), err)
		case c.Info.Name != "none":
			a.CRCP = &c
			a.closers.Module("crcp/"+c.Info.Name, c.Module)
		}
	}
	r.add(inc.Name)
	if a.INC, a.INCErr = set.INC.SelectOne(ctx, vals, mca.RoleApp, set.INC.Logger(in.Log, vals)); a.INCErr == nil {
		a.closers.Module("inc/"+a.INC.Info.Name, a.INC.Module)
	}
	r.add(crs.Name)
	if a.CRS, a.CRSErr = set.CRS.SelectOne(ctx, vals, mca.RoleApp, set.CRS.Logger(in.Log, vals)); a.CRSErr == nil {
		a.closers.Module("crs/"+a.CRS.Info.Name, a.CRS.Module)
	}
	r.done()
	return a, nil
}

// Close closes every module the rank selected, transports last.
func (a *App) Close() error { return a.closers.Close() }

// selectOne selects the best module of fw as p's role, logging through
// the framework's logger; r, when set, records the framework.
func selectOne[M any](ctx context.Context, r *recorder, p *Process, fw *mca.Framework[M]) (mca.Candidate[M], error) {
	if r != nil {
		r.add(fw.Name())
	}
	return fw.SelectOne(ctx, p.Values, p.Role, p.FrameworkLogger(fw.Name()))
}

// recorder holds an Assemble function to its row of Roles: it panics on a
// framework the row does not list, or listed in another order, and done
// on one the row lists but the function did not select. A mismatch is a
// programming error that the package's tests catch.
type recorder struct {
	role mca.Role
	seen []string
}

func newRecorder(role mca.Role) *recorder { return &recorder{role: role} }

func (r *recorder) add(fw string) {
	row := Roles[r.role]
	if len(r.seen) >= len(row) || row[len(r.seen)].Framework != fw {
		panic(fmt.Sprintf("boot: the %s assembly selects %s where Roles lists %v", r.role, fw, names(row)))
	}
	r.seen = append(r.seen, fw)
}

func (r *recorder) done() {
	if row := names(Roles[r.role]); !slices.Equal(r.seen, row) {
		panic(fmt.Sprintf("boot: the %s assembly selected %v; Roles lists %v", r.role, r.seen, row))
	}
}

func names(row []Part) []string {
	out := make([]string, len(row))
	for i, p := range row {
		out[i] = p.Framework
	}
	return out
}
