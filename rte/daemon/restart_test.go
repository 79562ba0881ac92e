package daemon

import (
	"errors"
	"os"
	"strings"
	"testing"

	crsself "gompi/components/crs/self"
	"gompi/components/sstore/central"
	"gompi/frameworks/crs"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
	pb "gompi/rte/control/proto"
)

// restartHarness is a harness whose job (CRS crsName in its settings)
// restarts from a snapshot on global storage (sstore central) through
// mod, and the reference of that snapshot, sequence 0, whose rank 0 was
// saved by the CRS snapCRS with meta.
func restartHarness(t *testing.T, crsName string, mod crs.Module, snapCRS string, meta map[string]string) (*harness, snapshot.Ref) {
	t.Helper()
	h := newHarnessCRS(t, crsName)
	params := mca.NewParams()
	vals, err := params.ResolveSettings([]mca.Setting{{Name: mca.ParamCREnabled, Value: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	store, _, err := central.New().Query(t.Context(), mca.Query{Values: vals, Priority: 20})
	if err != nil {
		t.Fatal(err)
	}
	h.d.cr.store, h.d.cr.crs = store, mod
	ref := snapshot.Ref{Dir: t.TempDir(), Name: "ref"}
	dir := ref.LocalPath(0, 0)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := snapshot.WriteLocal(dir, &snapshot.LocalMeta{Rank: 0, Node: "n1", CRS: snapCRS, CRSMeta: meta}); err != nil {
		t.Fatal(err)
	}
	return h, ref
}

// restart sends the Launch of a restart of rank 0 from ref, sequence 0.
func (h *harness) restart(ref snapshot.Ref, script string) *pb.RankStarted {
	h.t.Helper()
	h.d.handle(h.t.Context(), &pb.HNPMessage{Body: &pb.HNPMessage_Launch{Launch: &pb.Launch{
		Program: "/bin/sh", Args: []string{"-c", script}, Size: 1, Ranks: []int32{0}, DataSecret: h.data.Bytes(),
		Restart: &pb.RestartSpec{RefDir: ref.Dir, RefName: ref.Name, Seq: 0}}}})
	return h.waitSent(1, "Started", isStarted)[0].GetStarted()
}

// stderrOf returns what rank r wrote on its standard error so far.
func (h *harness) stderrOf(r int32) string {
	var b strings.Builder
	for _, m := range h.sentNow(func(m *pb.DaemonMessage) bool { return m.GetOutput() != nil }) {
		if o := m.GetOutput(); o.Rank == r && o.Stream == pb.Stream_STREAM_STDERR {
			b.Write(o.Data)
		}
	}
	return b.String()
}

// A CRS that restores processes itself (a crs.Restorer, here the plugin
// kit's fixture, which "restores" a shell) brings the rank back: the
// daemon records the process it returns, forwards its output from the
// pipes it handed in, and reports its exit as a fresh rank's. Under the
// rank init (crs=criu) the same, with the init's status pipe handed too.
func TestHarnessRestartThroughRestorer(t *testing.T) {
	for _, shape := range []string{"", criuCRS} {
		t.Run("crs="+shape, func(t *testing.T) {
			mod := restorerModule(t)
			if _, err := mca.Provision(t.Context(), mod, crs.Host{Daemon: &crs.DaemonHost{Node: "n1"}}); err != nil {
				t.Fatal(err)
			}
			h, ref := restartHarness(t, shape, mod, "restorer", map[string]string{"k": "v"})
			s := h.restart(ref, "echo relaunched; exit 1")
			if s.Error != "" || s.Pid <= 0 {
				t.Fatalf("restored rank's start: %+v", s)
			}
			e := h.exits(1)[0]
			if e.ExitCode != 7 || e.Signal != 0 || e.Killed {
				t.Errorf("restored rank's exit %+v, want status 7 (the restored process's)", e)
			}
			if out := h.rankOutput(0); out != "out\n" {
				t.Errorf("restored rank's output %q, want the restored process's", out)
			}
			if errs := h.stderrOf(0); !strings.Contains(errs, "err\n") {
				t.Errorf("restored rank's error output %q", errs)
			}
		})
	}
}

// A Restorer that fails is a start error of the rank.
func TestHarnessRestoreFails(t *testing.T) {
	mod := restorerModule(t)
	// Not provisioned: the fixture refuses to restore.
	h, ref := restartHarness(t, "", mod, "restorer", nil)
	if s := h.restart(ref, "exit 0"); s.Pid != 0 || !strings.Contains(s.Error, "restore of rank 0") {
		t.Errorf("start after a failed restore: %+v", s)
	}
}

// crs=self restarts by launching what its Restart gives back (the
// original program, which restores itself from the directory the
// restart variables name); a snapshot self did not take is refused.
func TestHarnessRestartThroughSelf(t *testing.T) {
	h, ref := restartHarness(t, "", crsself.NewModule(), crsself.Name, nil)
	s := h.restart(ref, `echo "$GOMPI_RESTART_DIR"`)
	if s.Error != "" || s.Pid <= 0 {
		t.Fatalf("restarted rank's start: %+v", s)
	}
	if e := h.exits(1)[0]; e.ExitCode != 0 {
		t.Errorf("restarted rank's exit %+v", e)
	}
	if out := h.rankOutput(0); out != ref.LocalPath(0, 0)+"\n" {
		t.Errorf("restarted rank said %q, want its local snapshot %s", out, ref.LocalPath(0, 0))
	}

	h, ref = restartHarness(t, "", crsself.NewModule(), "other", nil)
	if s := h.restart(ref, "exit 0"); s.Pid != 0 || !strings.Contains(s.Error, crs.ErrNoSnapshot.Error()) {
		t.Errorf("start from another CRS's snapshot: %+v", s)
	}
}

// Without a CRS the daemon cannot restart a rank, and says why.
func TestHarnessRestartWithoutCRS(t *testing.T) {
	h, ref := restartHarness(t, "", nil, crsself.Name, nil)
	h.d.cr.crsErr = errors.New("crs: no component answered") // as a selection says it
	if s := h.restart(ref, "exit 0"); s.Pid != 0 || !strings.Contains(s.Error, "no CRS") {
		t.Errorf("restart without a CRS: %+v", s)
	}
}
