package hnp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"gompi/frameworks/errmgr"
	"gompi/frameworks/snapc"
	pb "gompi/rte/control/proto"
	"gompi/rte/mapping"
)

// Migration (errmgr crmig), gompirun's part. A migration is an eager copy
// without residual dependencies (the dissertation's section 4.5):
//
//	save     a checkpoint of the moving ranks only: every rank drains its
//	         channels at the target safe point, the moving ones save
//	         themselves, and every rank then holds there
//	start    the moving ranks' new processes start on their new nodes from
//	         those snapshots, while the old ones still hold, and rejoin the
//	         job (their modex) with their new endpoints
//	release  the old processes end, the others resume and reach the moved
//	         ranks at their new endpoints; the daemons and the global
//	         coordinator learn the new placement
//
// For a job whose CRS saves ranks from outside (crs criu) the save is a
// dump: every rank is quiesced now (no safe point), the moving ranks are
// dumped, and every rank holds quiesced, with no socket; the start
// restores the dumps on the new nodes through their gompids and the CRS;
// the moved ranks have nothing to rejoin with, so the release comes once
// each was restored (started), and every rank, moved or not, meets the
// others at their new endpoints in the exchange of addresses that ends
// any suspension (mpi's Rejoiner.Remodex).
//
// A failure before the save is committed leaves the job as it was (every
// rank resumes). A failure after it abandons the migration: the fault goes
// to the ErrMgr stack as any other, and autor recovers the job from its
// last committed checkpoint.

// migration is the migration in progress.
type migration struct {
	dest    map[int]string // the moving ranks' new nodes
	from    map[int]string // their old nodes
	ranks   []int          // the moving ranks, ascending
	start   time.Time
	saved   time.Time // the save was committed
	seq     int
	entries map[int]map[string]string // rejoined ranks' new endpoints
	// restored: the ranks run again from their dumps (fromOutside), nil
	// for ranks that rejoin.
	restored map[int]bool
	reply    chan migrateOutcome
}

type migrateOutcome struct {
	res errmgr.MigrationResult
	err error
}

type (
	evMigrate struct {
		m     errmgr.Migration
		reply chan migrateOutcome
	}
	evMigSaved struct {
		res snapc.Result
		err error
	}
	evNodes struct{ reply chan []errmgr.NodeInfo }
)

// Nodes implements errmgr.Migrator.
func (rt jobRuntime) Nodes() []errmgr.NodeInfo {
	reply := make(chan []errmgr.NodeInfo, 1)
	if !rt.j.send(evNodes{reply: reply}) {
		return nil
	}
	return <-reply
}

func (j *job) nodes() []errmgr.NodeInfo {
	var out []errmgr.NodeInfo
	for _, n := range j.m.Nodes {
		d := j.daemons[n]
		out = append(out, errmgr.NodeInfo{Name: n, Ranks: slices.Clone(d.ranks), Up: d.state == daemonRunning && d.box != nil})
	}
	return out
}

// CheckpointTime implements errmgr.Migrator: the newest committed
// checkpoint's duration, from the reference's metadata.
func (rt jobRuntime) CheckpointTime(ctx context.Context) (time.Duration, bool) {
	j := rt.j
	if j.p.global == nil {
		return 0, false
	}
	meta, err := j.readMeta(ctx)
	if err != nil {
		return 0, false
	}
	s, ok := meta.NewestTimed()
	return s.Finished.Sub(s.Started), ok
}

// Migrate implements errmgr.Migrator.
func (rt jobRuntime) Migrate(ctx context.Context, m errmgr.Migration) (errmgr.MigrationResult, error) {
	reply := make(chan migrateOutcome, 1)
	select {
	case rt.j.events <- evMigrate{m: m, reply: reply}:
	case <-rt.j.done:
		return errmgr.MigrationResult{}, fmt.Errorf("hnp: migrate: %w", errmgr.ErrJobOver)
	case <-ctx.Done():
		return errmgr.MigrationResult{}, fmt.Errorf("hnp: migrate: %w", ctx.Err())
	}
	select {
	case o := <-reply:
		return o.res, o.err
	case <-rt.j.done:
		return errmgr.MigrationResult{}, fmt.Errorf("hnp: migrate: %w", errmgr.ErrJobOver)
	}
}

// startMigration checks a migration and starts its save.
func (j *job) startMigration(e evMigrate) {
	refuse := func(format string, a ...any) {
		e.reply <- migrateOutcome{err: fmt.Errorf("hnp: migrate: "+format, a...)}
	}
	switch {
	case j.state != jobRunning:
		refuse("the job is %s", j.state)
		return
	case j.p.global == nil:
		refuse("the job does not coordinate checkpoints (run it with -am ft-enable-cr)")
		return
	case j.recovery != nil:
		refuse("the job is recovering from a failure")
		return
	case j.migration != nil:
		refuse("another migration (ranks %v) is under way", j.migration.ranks)
		return
	case len(e.m.Dest) == 0:
		refuse("no rank to move")
		return
	}
	mig := &migration{dest: map[int]string{}, from: map[int]string{}, start: j.p.now(), reply: e.reply, entries: map[int]map[string]string{}}
	if j.mods.CRSFromOutside {
		mig.restored = map[int]bool{}
	}
	for r, n := range e.m.Dest {
		if r < 0 || r >= len(j.ranks) {
			refuse("rank %d: the job has ranks 0 to %d", r, len(j.ranks)-1)
			return
		}
		rs := j.ranks[r]
		d := j.daemons[n]
		switch {
		case rs.done || rs.failed:
			refuse("rank %d is no longer running (%s)", r, rs.state)
			return
		case d == nil:
			refuse("rank %d: node %q is not a node of the job (nodes: %s)", r, n, strings.Join(j.m.Nodes, ", "))
			return
		case d.state != daemonRunning || d.box == nil:
			refuse("rank %d: node %s is %s", r, n, d.state)
			return
		case n == rs.node:
			refuse("rank %d already runs on node %s", r, n)
			return
		}
		mig.dest[r], mig.from[r] = n, rs.node
		mig.ranks = append(mig.ranks, r)
	}
	sort.Ints(mig.ranks)
	j.migration = mig
	j.elog.Info("migration: saving the moving ranks", "ranks", mig.ranks, "to", mig.dest, "why", e.m.Why)
	g, ranks := j.p.global, slices.Clone(mig.ranks)
	j.spawn(func() event {
		res, err := g.Checkpoint(context.Background(), snapc.Request{Ranks: ranks}, nil)
		return evMigSaved{res: res, err: err}
	})
}

// migSaved starts the moved ranks on their new nodes once their save is
// committed, or ends a migration whose save failed.
func (j *job) migSaved(e evMigSaved) {
	mig := j.migration
	if mig == nil {
		return // abandoned meanwhile
	}
	if e.err != nil {
		j.migration = nil
		mig.reply <- migrateOutcome{err: fmt.Errorf("hnp: migrate: ranks %v were not moved (the job runs on as it was): %w", mig.ranks, e.err)}
		return
	}
	mig.saved, mig.seq = j.p.now(), e.res.Seq
	rankNodes := j.placementWith(mig.dest)
	byNode := map[string][]int32{}
	for _, r := range mig.ranks {
		byNode[mig.dest[r]] = append(byNode[mig.dest[r]], int32(r))
		rs := j.ranks[r]
		rs.node, rs.state, rs.pid = mig.dest[r], rankRunning, 0
	}
	ref := j.p.global.Ref()
	for _, n := range slices.Sorted(maps.Keys(byNode)) {
		j.tell(j.daemons[n], &pb.HNPMessage{Body: &pb.HNPMessage_Launch{Launch: &pb.Launch{
			Migrate: true, Ranks: byNode[n], RankNodes: rankNodes, Size: int32(len(j.ranks)),
			Restart:    &pb.RestartSpec{RefDir: ref.Dir, RefName: ref.Name, Seq: int32(mig.seq)},
			DataSecret: j.dataSecret.Bytes(),
		}}})
	}
	j.elog.Info("migration: saved; starting the moved ranks on their new nodes", "seq", mig.seq, "took", mig.saved.Sub(mig.start))
}

// placementWith is the ranks' nodes with dest applied.
func (j *job) placementWith(dest map[int]string) []string {
	out := slices.Clone(j.m.RankNode)
	for r, n := range dest {
		out[r] = n
	}
	return out
}

// rejoin records a moved rank's new endpoints; once every moved rank has
// rejoined, they get the job's table and the others are released.
func (j *job) rejoin(node string, e *pb.RankData) {
	mig := j.migration
	r := int(e.GetRank())
	if mig == nil || mig.saved.IsZero() || mig.dest[r] != node || mig.restored != nil {
		j.log.Warn("rejoin of a rank no migration moves to this node", "node", node, "rank", r)
		return
	}
	mig.entries[r] = e.GetData()
	if len(mig.entries) < len(mig.ranks) {
		return
	}
	for r, data := range mig.entries {
		j.endpoints[int32(r)] = data
	}
	table := &pb.Rejoined{FenceSeq: j.fenceDone}
	for _, r := range j.ranks {
		if data, ok := j.endpoints[int32(r.rank)]; ok && !r.failed {
			table.Entries = append(table.Entries, &pb.RankData{Rank: int32(r.rank), Data: data})
		} else {
			table.Failed = append(table.Failed, int32(r.rank))
		}
	}
	dests := map[string]bool{}
	for _, n := range mig.dest {
		dests[n] = true
	}
	for n := range dests {
		j.tell(j.daemons[n], &pb.HNPMessage{Body: &pb.HNPMessage_Rejoined{Rejoined: table}})
	}
	j.moved(mig)
}

// restoredStarted records that a rank a migration restores from its dump
// runs on its new node (its daemon reported it started); once every moved
// rank does, the migration is released. Ranks quiesced from outside
// exchange their new endpoints among themselves when they resume.
func (j *job) restoredStarted(r *rankProc, node string) {
	mig := j.migration
	if mig == nil || mig.restored == nil || mig.saved.IsZero() || mig.dest[r.rank] != node {
		return
	}
	mig.restored[r.rank] = true
	if len(mig.restored) == len(mig.ranks) {
		j.moved(mig)
	}
}

// moved releases migration mig once its ranks run on their new nodes:
// their old processes end, the others resume toward the new ones, and
// every daemon and the global coordinator learn the new placement.
func (j *job) moved(mig *migration) {
	if err := j.p.global.Release(snapc.Release{Leave: mig.ranks, Peers: mig.entries}); err != nil {
		j.abandonMigration(fmt.Sprintf("the held ranks could not be released: %v", err))
		return
	}
	for r, n := range mig.from {
		j.movedFrom[r] = n
	}
	// Every daemon learns the placement; the old nodes stop counting the
	// moved ranks.
	before := j.m
	j.m = mapping.Map{Nodes: j.m.Nodes, RankNode: j.placementWith(mig.dest)}
	for _, d := range j.daemons {
		d.ranks = j.m.Ranks(d.node)
	}
	out := make([]int32, len(mig.ranks))
	for i, r := range mig.ranks {
		out[i] = int32(r)
	}
	j.sendAll(&pb.HNPMessage{Body: &pb.HNPMessage_MoveRanks{MoveRanks: &pb.MoveRanks{Out: out, RankNodes: j.m.RankNode}}})
	j.p.global.Place(j.m.RankNode)
	now := j.p.now()
	res := errmgr.MigrationResult{Seq: mig.seq, Took: now.Sub(mig.start), Checkpoint: mig.saved.Sub(mig.start), Restart: now.Sub(mig.saved)}
	var moves []string
	for _, r := range mig.ranks {
		moves = append(moves, fmt.Sprintf("rank %d %s -> %s", r, before.RankNode[r], mig.dest[r]))
	}
	fmt.Fprintf(j.p.stderr, "gompirun: migration: %s in %.2f s (save %.2f s, restart %.2f s)\n",
		strings.Join(moves, ", "), res.Took.Seconds(), res.Checkpoint.Seconds(), res.Restart.Seconds())
	j.migration = nil
	j.lastMig = &migRecord{res: res, from: mig.from, dest: mig.dest}
	mig.reply <- migrateOutcome{res: res}
}

// abandonMigration gives up the migration in progress after a failure:
// the failure itself goes to the ErrMgr stack (autor recovers the job).
func (j *job) abandonMigration(why string) {
	mig := j.migration
	if mig == nil {
		return
	}
	j.migration = nil
	j.elog.Warn("migration abandoned", "ranks", mig.ranks, "why", why)
	mig.reply <- migrateOutcome{err: fmt.Errorf("hnp: migrate ranks %v: %w: %s", mig.ranks, errmgr.ErrMigrationAbandoned, why)}
}

// migRecord is the last finished migration, for the tool that asked.
type migRecord struct {
	res        errmgr.MigrationResult
	from, dest map[int]string
}

// oldExited handles the end of a moved rank's old process, on the node
// it left: true when the migration under way (onExit) or one done
// expected it.
func (j *job) oldExited(r *rankProc, node string, ex *pb.RankExited) bool {
	if j.consult(func(ep episode) verdict { return ep.onExit(j, r, node, ex) })&absorbed != 0 {
		return true
	}
	if j.movedFrom[r.rank] != node {
		return false
	}
	delete(j.movedFrom, r.rank)
	if ex.ExitCode != 0 || ex.Signal != 0 {
		j.log.Warn("a moved rank's old process ended badly after its release", "rank", r.rank, "node", node, "code", ex.ExitCode, "signal", ex.Signal)
	}
	return true
}

// onExit: a moved rank's old process ending while held, before its
// release, is a failure of the rank, which abandons the migration; a
// moved rank that cannot start on its new node (ex nil) is a fault like
// any other (autor recovers the job), not an abort.
func (mig *migration) onExit(j *job, r *rankProc, node string, ex *pb.RankExited) verdict {
	switch {
	case ex == nil && mig.dest[r.rank] == node:
		return isFault
	case ex != nil && mig.from[r.rank] == node && node != r.node && !mig.saved.IsZero():
		j.abandonMigration(fmt.Sprintf("rank %d's old process on node %s ended before its release", r.rank, node))
		j.faultExit(r.rank, node, ex)
		return absorbed
	}
	return goOn
}

// onFault: a failure abandons the migration; the fault goes on to the
// ErrMgr stack (autor recovers the job).
func (mig *migration) onFault(j *job, f errmgr.Fault) verdict {
	j.abandonMigration(f.Describe())
	return goOn
}

// onNodeLost: losing a node the migration moves ranks from or to is a
// fault, even when no rank runs there (yet, or any more).
func (mig *migration) onNodeLost(j *job, d *dconn) verdict {
	if j.state == jobRunning && j.inMigration(d.node) {
		return isFault
	}
	return goOn
}

func (mig *migration) onAbort(*job) {}
func (mig *migration) holds() bool  { return false }

var _ episode = (*migration)(nil)

// predicted asks the ErrMgr stack to act on a predicted fault and returns
// what it did.
func (j *job) predicted(p *errmgr.Prediction, from string) (int, error) {
	if len(p.Ranks) == 0 && len(p.Nodes) == 0 && len(p.Wishes) == 0 {
		return 0, errors.New("name ranks or nodes predicted to fail")
	}
	for _, r := range p.Ranks {
		if r < 0 || r >= len(j.ranks) {
			return 0, fmt.Errorf("rank %d: the job has ranks 0 to %d", r, len(j.ranks)-1)
		}
	}
	for _, w := range p.Wishes {
		if w.Rank < 0 || w.Rank >= len(j.ranks) {
			return 0, fmt.Errorf("rank %d: the job has ranks 0 to %d", w.Rank, len(j.ranks)-1)
		}
	}
	for _, n := range slices.Concat(p.Nodes, p.Onto) {
		if j.daemons[n] == nil {
			return 0, fmt.Errorf("node %q is not a node of the job (nodes: %s)", n, strings.Join(j.m.Nodes, ", "))
		}
	}
	if j.state != jobRunning {
		return 0, fmt.Errorf("the job is %s", j.state)
	}
	f := errmgr.Fault{Kind: errmgr.Predicted, Rank: -1, Node: strings.Join(p.Nodes, ","), Time: j.p.now(), Predict: p, Detail: from}
	if len(p.Nodes) == 0 {
		f.Node = ""
	}
	return j.fault(f), nil
}

// inMigration reports whether a migration under way moves ranks from or
// to node.
func (j *job) inMigration(node string) bool {
	if mig := j.migration; mig != nil {
		for r := range mig.dest {
			if mig.dest[r] == node || mig.from[r] == node {
				return true
			}
		}
	}
	return false
}

// evPredict is a predicted fault from a tool (gompi-migrate) or a rank
// (cr.Migrate). accepted, when set, hears at once whether the stack was
// given it; done, when set, gets the stack's outcome.
type evPredict struct {
	p        *errmgr.Prediction
	from     string
	accepted chan error
	done     chan evFault
}

func (j *job) predict(e evPredict) {
	if !slices.Contains(j.p.stack.Names(), "crmig") {
		e.accepted <- fmt.Errorf("no ErrMgr policy of this job migrates ranks (its stack: %s): run it with -am ft-enable-cr, and errmgr crmig if the errmgr selection is narrowed",
			strings.Join(j.p.stack.Names(), ", "))
		return
	}
	id, err := j.predicted(e.p, e.from)
	if err == nil && e.done != nil {
		j.faultDone[id] = e.done
	}
	e.accepted <- err
}

// rankMigrate takes a rank's cr.Migrate: accepted (or refused) at once.
func (j *job) rankMigrate(d *dconn, m *pb.RankMigrate) {
	p := predictionFromProto(m.GetRequest(), j.p.now())
	accepted := make(chan error, 1)
	j.predict(evPredict{p: p, from: fmt.Sprintf("asked for by rank %d (cr.Migrate)", m.GetRequest().GetRank()), accepted: accepted})
	done := &pb.RankMigrateDone{Id: m.GetId()}
	if err := <-accepted; err != nil {
		done.Error = "gompirun: " + err.Error()
	}
	if d.box != nil {
		j.tell(d, &pb.HNPMessage{Body: &pb.HNPMessage_RankMigrateDone{RankMigrateDone: done}})
	}
}

// predictionFromProto reads a migration request.
func predictionFromProto(m *pb.MigrateRequest, now time.Time) *errmgr.Prediction {
	p := &errmgr.Prediction{Nodes: m.GetOff(), Onto: m.GetOnto()}
	for _, r := range m.GetRanks() {
		p.Ranks = append(p.Ranks, int(r))
	}
	if w := m.GetWithinNano(); w > 0 {
		p.Deadline = now.Add(time.Duration(w))
	}
	for _, w := range m.GetWishes() {
		p.Wishes = append(p.Wishes, errmgr.MigrateWish{Rank: int(w.GetRank()), Host: w.GetHost(), Near: int(w.GetNear()), OffNode: w.GetOffNode()})
	}
	return p
}
