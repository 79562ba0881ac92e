package plugin

import (
	"context"
	"errors"

	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// The SnapC framework over the bridge. A module's Checkpoint is a call; a
// Coordinator's NewGlobal and NewLocal make coordinators the plugin holds
// by handle (released with the module), whose methods are calls. What a
// coordinator is given crosses as lent host objects: the global's
// NodeLink and MetaStore, the local's AppPort, Store (the daemon's SStore
// module, whose Sync progress then stays in the daemon) and Notify; the
// job's Values as its settings, resolved again in the plugin. Global.Close
// carries its reason's text, not its error values. The "never blocks"
// calls (Deliver, NodeLost, AppReply, AppGone) return within the control
// bound. A coordinator's calls are many in every checkpoint, so a plugin
// snapc is slower than the built-in one; the bridge carries it for a
// coordinator that must live out of process.

var snapcAdapter = adapter{
	methods: snapcMethods,
	extended: func(m any) bool {
		_, ok := m.(snapc.Coordinator)
		return ok
	},
	carrier: carry(func(s *frameworks.Set) *mca.Framework[snapc.Module] { return s.SnapC },
		func(r *remote, extended bool) snapc.Module {
			if extended {
				return snapcCoordinator{snapcModule{r}}
			}
			return snapcModule{r}
		}),
}

// snapcJob is snapc.JobSpec with its objects lent.
type snapcJob struct {
	Job       string
	RankNodes []string
	Ref       snapshot.Ref
	Settings  []mca.Setting
	AMCA      []string
	Launch    crs.Launch
	// FromOutside crosses; a NodeSpec's Dumper does not yet (a plugin's
	// local coordinator refuses a LocalDump: it has no Dumper).
	FromOutside bool
	Values      []mca.Setting // JobSpec.Values.All()
	HasValues   bool
	Meta        uint64 // 0: the plugin's own file system, as nil in process
	Link        uint64
}

// snapcNode is snapc.NodeSpec with its objects lent.
type snapcNode struct {
	Node      string
	Ranks     []int
	Values    []mca.Setting
	HasValues bool
	Store     uint64
	Notify    uint64
	Port      uint64
}

var snapcMethods = methods{
	"Checkpoint": fn(func(ctx context.Context, m snapc.Module, a snapc.Request, _ *scope) (snapc.Result, error) {
		return m.Checkpoint(ctx, a)
	}),
	"NewGlobal": fn(func(ctx context.Context, m snapc.Coordinator, a snapcJob, sc *scope) (uint64, error) {
		spec := snapc.JobSpec{Job: a.Job, RankNodes: a.RankNodes, Ref: a.Ref, Settings: a.Settings, AMCA: a.AMCA,
			Launch: a.Launch, FromOutside: a.FromOutside, Log: sc.srv.log.With("framework", sc.comp.framework, "component", sc.comp.name)}
		var err error
		if spec.Values, err = sc.values(a.HasValues, a.Values); err != nil {
			return 0, err
		}
		meta, err := sc.host(a.Meta)
		if err != nil {
			return 0, err
		}
		if meta != nil {
			spec.Meta = metaCalls{meta}
		}
		link, err := sc.host(a.Link)
		if err != nil {
			return 0, err
		}
		g, err := m.NewGlobal(spec, linkCalls{link})
		if err != nil {
			return 0, err
		}
		return sc.hold(g, globalMethods), nil
	}),
	"NewLocal": fn(func(ctx context.Context, m snapc.Coordinator, a snapcNode, sc *scope) (uint64, error) {
		spec := snapc.NodeSpec{Node: a.Node, Ranks: a.Ranks, Log: sc.srv.log.With("framework", sc.comp.framework, "component", sc.comp.name)}
		var err error
		if spec.Values, err = sc.values(a.HasValues, a.Values); err != nil {
			return 0, err
		}
		objs := make([]caller, 3)
		for i, id := range []uint64{a.Store, a.Notify, a.Port} {
			if objs[i], err = sc.host(id); err != nil {
				return 0, err
			}
		}
		if objs[0] != nil {
			spec.Store = sstoreCalls{objs[0]}
		}
		if notify := objs[1]; notify != nil {
			spec.Notify = func(r snapc.LocalReply) { _ = notify.call(context.Background(), control, "Notify", r, nil) }
		}
		l, err := m.NewLocal(spec, portCalls{objs[2]})
		if err != nil {
			return 0, err
		}
		return sc.hold(l, localMethods), nil
	}),
}

// values resolves the host's settings with the plugin's parameters.
func (sc *scope) values(has bool, settings []mca.Setting) (*mca.Values, error) {
	if !has {
		return nil, nil
	}
	return sc.srv.params.ResolveSettings(settings)
}

type globalCheckpoint struct {
	Req      snapc.Request
	Progress uint64
	Rank     int
	Target   uint64
	Options  crs.Options
}

type snapcNote struct {
	Node, Why string
	Rank      int
	Nodes     []string
	Ranks     []int
	Reply     snapc.AppReply
}

var globalMethods = methods{
	"Checkpoint": fn(func(ctx context.Context, g snapc.Global, a globalCheckpoint, sc *scope) (snapc.Result, error) {
		progress, err := sc.host(a.Progress)
		if err != nil {
			return snapc.Result{}, err
		}
		var report func(snapc.Event)
		if progress != nil {
			report = func(e snapc.Event) { _ = progress.call(ctx, control, "Event", e, nil) }
		}
		return g.Checkpoint(ctx, a.Req, report)
	}),
	"AppCheckpoint": fn(func(ctx context.Context, g snapc.Global, a globalCheckpoint, _ *scope) (snapc.Result, error) {
		return g.AppCheckpoint(ctx, a.Rank, a.Target, a.Options)
	}),
	"Deliver": fn(func(_ context.Context, g snapc.Global, r snapc.LocalReply, _ *scope) (none, error) {
		g.Deliver(r)
		return none{}, nil
	}),
	"NodeLost": fn(func(_ context.Context, g snapc.Global, a snapcNote, _ *scope) (none, error) {
		g.NodeLost(a.Node, a.Why)
		return none{}, nil
	}),
	"CloseGlobal": fn(func(_ context.Context, g snapc.Global, a snapcNote, _ *scope) (none, error) {
		g.Close(errors.New(a.Why))
		return none{}, nil
	}),
	"Ref": fn(func(_ context.Context, g snapc.Global, _ none, _ *scope) (snapshot.Ref, error) { return g.Ref(), nil }),
	"Release": fn(func(_ context.Context, g snapc.Global, r snapc.Release, _ *scope) (none, error) {
		return none{}, g.Release(r)
	}),
	"Place": fn(func(_ context.Context, g snapc.Global, a snapcNote, _ *scope) (none, error) {
		g.Place(a.Nodes)
		return none{}, nil
	}),
}

var localMethods = methods{
	"Handle": fn(func(ctx context.Context, l snapc.Local, r snapc.LocalRequest, _ *scope) (snapc.LocalReply, error) {
		return l.Handle(ctx, r), nil
	}),
	"AppReply": fn(func(_ context.Context, l snapc.Local, a snapcNote, _ *scope) (none, error) {
		l.AppReply(a.Rank, a.Reply)
		return none{}, nil
	}),
	"AppGone": fn(func(_ context.Context, l snapc.Local, a snapcNote, _ *scope) (none, error) {
		l.AppGone(a.Rank, a.Why)
		return none{}, nil
	}),
	"SetRanks": fn(func(_ context.Context, l snapc.Local, a snapcNote, _ *scope) (none, error) {
		l.SetRanks(a.Ranks)
		return none{}, nil
	}),
}

type linkSend struct {
	Node string
	Req  snapc.LocalRequest
}

type portSend struct {
	Rank int
	Req  snapc.AppRequest
}

type metaArgs struct {
	Ref       snapshot.Ref
	Seq, Rank int
	Global    *snapshot.GlobalMeta
}

// The host's objects a coordinator is given, served to the plugin.
var (
	linkMethods = methods{
		"Send": fn(func(_ context.Context, l snapc.NodeLink, a linkSend, _ *scope) (none, error) {
			return none{}, l.Send(a.Node, a.Req)
		}),
		"Terminate": fn(func(_ context.Context, l snapc.NodeLink, _ none, _ *scope) (none, error) {
			l.Terminate()
			return none{}, nil
		}),
	}
	metaMethods = methods{
		"ReadGlobal": fn(func(ctx context.Context, m snapshot.MetaStore, a metaArgs, _ *scope) (*snapshot.GlobalMeta, error) {
			return m.ReadGlobal(ctx, a.Ref)
		}),
		"WriteGlobal": fn(func(ctx context.Context, m snapshot.MetaStore, a metaArgs, _ *scope) (none, error) {
			return none{}, m.WriteGlobal(ctx, a.Ref, a.Global)
		}),
		"ReadLocal": fn(func(ctx context.Context, m snapshot.MetaStore, a metaArgs, _ *scope) (*snapshot.LocalMeta, error) {
			return m.ReadLocal(ctx, a.Ref, a.Seq, a.Rank)
		}),
	}
	portMethods = methods{
		"Send": fn(func(_ context.Context, p snapc.AppPort, a portSend, _ *scope) (none, error) {
			return none{}, p.Send(a.Rank, a.Req)
		}),
	}
	notifyMethods = methods{
		"Notify": fn(func(_ context.Context, f func(snapc.LocalReply), r snapc.LocalReply, _ *scope) (none, error) {
			f(r)
			return none{}, nil
		}),
	}
	eventMethods = methods{
		"Event": fn(func(_ context.Context, f func(snapc.Event), e snapc.Event, _ *scope) (none, error) {
			f(e)
			return none{}, nil
		}),
	}
)

// linkCalls, metaCalls and portCalls are the host's objects in the plugin.
type (
	linkCalls struct{ c caller }
	metaCalls struct{ c caller }
	portCalls struct{ c caller }
)

func (l linkCalls) Send(node string, req snapc.LocalRequest) error {
	return l.c.call(context.Background(), control, "Send", linkSend{node, req}, nil)
}

func (l linkCalls) Terminate() { _ = l.c.call(context.Background(), control, "Terminate", nil, nil) }

func (m metaCalls) ReadGlobal(ctx context.Context, ref snapshot.Ref) (g *snapshot.GlobalMeta, err error) {
	err = m.c.call(ctx, dataIO, "ReadGlobal", metaArgs{Ref: ref}, &g)
	return g, err
}

func (m metaCalls) WriteGlobal(ctx context.Context, ref snapshot.Ref, g *snapshot.GlobalMeta) error {
	return m.c.call(ctx, dataIO, "WriteGlobal", metaArgs{Ref: ref, Global: g}, nil)
}

func (m metaCalls) ReadLocal(ctx context.Context, ref snapshot.Ref, seq, rank int) (l *snapshot.LocalMeta, err error) {
	err = m.c.call(ctx, dataIO, "ReadLocal", metaArgs{Ref: ref, Seq: seq, Rank: rank}, &l)
	return l, err
}

func (p portCalls) Send(rank int, req snapc.AppRequest) error {
	if p.c == nil {
		return snapc.ErrNoApp
	}
	return p.c.call(context.Background(), control, "Send", portSend{rank, req}, nil)
}

// snapcModule is a plugin's SnapC module.
type snapcModule struct{ *remote }

func (m snapcModule) Checkpoint(ctx context.Context, req snapc.Request) (res snapc.Result, err error) {
	err = m.call(ctx, dataIO, "Checkpoint", req, &res)
	return res, err
}

// snapcCoordinator is a plugin's SnapC module that coordinates.
type snapcCoordinator struct{ snapcModule }

func settingsOf(v *mca.Values) ([]mca.Setting, bool) {
	if v == nil {
		return nil, false
	}
	return v.All(), true
}

func (m snapcCoordinator) NewGlobal(job snapc.JobSpec, link snapc.NodeLink) (snapc.Global, error) {
	a := snapcJob{Job: job.Job, RankNodes: job.RankNodes, Ref: job.Ref, Settings: job.Settings, AMCA: job.AMCA,
		Launch: job.Launch, FromOutside: job.FromOutside, Link: m.lend(link, linkMethods)}
	a.Values, a.HasValues = settingsOf(job.Values)
	if job.Meta != nil {
		a.Meta = m.lend(job.Meta, metaMethods)
	}
	var id uint64
	if err := m.call(context.Background(), control, "NewGlobal", a, &id); err != nil {
		return nil, err
	}
	return globalProxy{r: m.child(id)}, nil
}

func (m snapcCoordinator) NewLocal(node snapc.NodeSpec, port snapc.AppPort) (snapc.Local, error) {
	a := snapcNode{Node: node.Node, Ranks: node.Ranks}
	a.Values, a.HasValues = settingsOf(node.Values)
	if node.Store != nil {
		a.Store = m.lend(node.Store, sstoreMethods)
	}
	if node.Notify != nil {
		a.Notify = m.lend(node.Notify, notifyMethods)
	}
	if port != nil {
		a.Port = m.lend(port, portMethods)
	}
	var id uint64
	if err := m.call(context.Background(), control, "NewLocal", a, &id); err != nil {
		return nil, err
	}
	return localProxy{r: m.child(id)}, nil
}

// globalProxy is a plugin's global coordinator.
type globalProxy struct{ r *remote }

// warn logs a failed call of a method that returns no error.
func warn(r *remote, method string, err error) {
	if err != nil {
		r.p.log.Warn("snapc: call a plugin's coordinator", "component", r.name(), "method", method, "err", err)
	}
}

func (g globalProxy) Checkpoint(ctx context.Context, req snapc.Request, progress func(snapc.Event)) (res snapc.Result, err error) {
	a := globalCheckpoint{Req: req}
	if progress != nil {
		a.Progress = g.r.p.cb.objs.add(object{v: progress, methods: eventMethods})
		defer g.r.p.cb.objs.release(a.Progress)
	}
	err = g.r.call(ctx, dataIO, "Checkpoint", a, &res)
	return res, err
}

func (g globalProxy) AppCheckpoint(ctx context.Context, rank int, target uint64, opts crs.Options) (res snapc.Result, err error) {
	err = g.r.call(ctx, dataIO, "AppCheckpoint", globalCheckpoint{Rank: rank, Target: target, Options: opts}, &res)
	return res, err
}

func (g globalProxy) Deliver(r snapc.LocalReply) {
	warn(g.r, "Deliver", g.r.call(context.Background(), control, "Deliver", r, nil))
}

func (g globalProxy) NodeLost(node, why string) {
	warn(g.r, "NodeLost", g.r.call(context.Background(), control, "NodeLost", snapcNote{Node: node, Why: why}, nil))
}

// Close closes the coordinator in the plugin and releases its handle.
func (g globalProxy) Close(why error) {
	warn(g.r, "Close", g.r.call(context.Background(), control, "CloseGlobal", snapcNote{Why: why.Error()}, nil))
	warn(g.r, "Close", g.r.call(context.Background(), control, closeMethod, nil, nil))
}

func (g globalProxy) Ref() (ref snapshot.Ref) {
	warn(g.r, "Ref", g.r.call(context.Background(), control, "Ref", nil, &ref))
	return ref
}

func (g globalProxy) Release(rel snapc.Release) error {
	return g.r.call(context.Background(), control, "Release", rel, nil)
}

func (g globalProxy) Place(rankNodes []string) {
	warn(g.r, "Place", g.r.call(context.Background(), control, "Place", snapcNote{Nodes: rankNodes}, nil))
}

// localProxy is a plugin's local coordinator.
type localProxy struct{ r *remote }

// Handle's reply says a failed call as a failure of the node.
func (l localProxy) Handle(ctx context.Context, req snapc.LocalRequest) (rep snapc.LocalReply) {
	if err := l.r.call(ctx, dataIO, "Handle", req, &rep); err != nil {
		return snapc.LocalReply{ID: req.ID, Kind: req.Kind, Err: err.Error()}
	}
	return rep
}

func (l localProxy) AppReply(rank int, r snapc.AppReply) {
	warn(l.r, "AppReply", l.r.call(context.Background(), control, "AppReply", snapcNote{Rank: rank, Reply: r}, nil))
}

func (l localProxy) AppGone(rank int, why string) {
	warn(l.r, "AppGone", l.r.call(context.Background(), control, "AppGone", snapcNote{Rank: rank, Why: why}, nil))
}

func (l localProxy) SetRanks(ranks []int) {
	warn(l.r, "SetRanks", l.r.call(context.Background(), control, "SetRanks", snapcNote{Ranks: ranks}, nil))
}

var (
	_ snapc.Coordinator  = snapcCoordinator{}
	_ snapc.Global       = globalProxy{}
	_ snapc.Local        = localProxy{}
	_ snapc.NodeLink     = linkCalls{}
	_ snapc.AppPort      = portCalls{}
	_ snapshot.MetaStore = metaCalls{}
)
