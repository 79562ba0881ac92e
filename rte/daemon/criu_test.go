package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	crscriu "gompi/components/crs/criu"
	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
	pb "gompi/rte/control/proto"
	"gompi/testdata/plugins/fixtures"
)

// criuModule selects crs criu as gompid does (C/R on, the job's CRS
// criu, selected as a rank would: boot.AssembleDaemon) and provisions it
// with the node. As root a missing or broken CRIU fails the test: CI,
// root with CRIU installed, runs it.
// restorerModule is the plugin kit's restorer fixture (a crs.Restorer
// that relaunches), unprovisioned.
func restorerModule(t *testing.T) crs.Module {
	t.Helper()
	mod, _, err := fixtures.RestorerCRS().Query(t.Context(), mca.Query{})
	if err != nil {
		t.Fatal(err)
	}
	return mod
}

func criuModule(t *testing.T) crs.Module {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("CRIU needs root")
	}
	params := mca.NewParams()
	set := frameworks.New(params)
	set.CRS.Register(crscriu.New())
	// The job's settings name criu, as gompirun sends them.
	vals, err := params.ResolveSettings([]mca.Setting{{Name: mca.ParamCREnabled, Value: "1"}, {Name: crs.Name, Value: crscriu.Name}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.CRS.SelectOne(t.Context(), vals, mca.RoleApp, nil)
	if err != nil {
		t.Fatalf("select crs=criu as root: %v", err)
	}
	if _, err := mca.Provision(t.Context(), c.Module, crs.Host{Daemon: &crs.DaemonHost{Node: "n1"}}); err != nil {
		t.Fatal(err)
	}
	return c.Module
}

// waitOutput waits until rank r's standard output holds want.
func (h *harness) waitOutput(r int32, want string) {
	h.t.Helper()
	h.waitSent(1, "output "+want, func(*pb.DaemonMessage) bool {
		return strings.Contains(h.stdoutLocked(r), want)
	})
}

// stdoutLocked is rank r's standard output so far, with h.mu held.
func (h *harness) stdoutLocked(r int32) string {
	var b strings.Builder
	for _, m := range h.sent {
		if o := m.GetOutput(); o != nil && o.Rank == r && o.Stream == pb.Stream_STREAM_STDOUT {
			b.Write(o.Data)
		}
	}
	return b.String()
}

// criuRank is a rank with no C/R code: it closes its secret descriptor (as
// rankclient does), says it is ready, says "resumed" on SIGUSR1, and dies
// of SIGTERM.
const criuRank = `exec 3<&-; trap 'echo resumed' USR1; echo ready; while :; do sleep 600 & wait $!; done`

// A rank gompid started under the rank init (crs=criu) is dumped by crs
// criu and comes back in another daemon through the daemon's restore
// path: the init's status pipe and the output pipes are replaced by the
// new daemon's, signals reach the restored rank through its init, and
// its death by SIGTERM is reported as a fresh rank's.
func TestHarnessCRIURoundTrip(t *testing.T) {
	mod := criuModule(t)
	h1 := newHarnessCRS(t, criuCRS)
	pids := h1.launch(1, criuRank, 0)
	h1.waitOutput(0, "ready\n")

	ref := snapshot.Ref{Dir: t.TempDir(), Name: "ref"}
	dir := ref.LocalPath(0, 0)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	res, err := mod.Checkpoint(t.Context(), crs.CheckpointRequest{PID: int(pids[0]), Dir: dir, Options: crs.Options{Term: true}})
	if err != nil {
		t.Fatalf("dump of the rank under its init: %v", err)
	}
	var bytes int64
	for _, f := range res.Files {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil {
			bytes += st.Size()
		}
	}
	// What the init adds to a rank's images (the rank here is a shell).
	t.Logf("images of the init (the test binary) and its shell rank: %d files, %d bytes", len(res.Files), bytes)
	if err := snapshot.WriteLocal(dir, &snapshot.LocalMeta{Rank: 0, PID: int(pids[0]), Node: "n1", CRS: crscriu.Name, CRSMeta: res.Meta}); err != nil {
		t.Fatal(err)
	}
	h1.exits(1) // CRIU ended the dumped tree

	h2, _ := restartHarness(t, criuCRS, mod, crscriu.Name, nil)
	s := h2.restart(ref, "exit 99")
	if s.Error != "" || s.Pid <= 0 {
		t.Fatalf("restored rank's start: %+v", s)
	}
	if ppid := parentOf(t, int(s.Pid)); ppid != os.Getpid() {
		t.Errorf("restored init %d's parent %d, want the daemon (%d)", s.Pid, ppid, os.Getpid())
	}
	h2.d.signalAll(syscall.SIGUSR1)
	h2.waitOutput(0, "resumed\n")
	h2.d.signalAll(syscall.SIGTERM)
	e := h2.exits(1)[0]
	if e.Signal != int32(syscall.SIGTERM) || e.ExitCode != 0 {
		t.Errorf("restored rank's exit %+v, want SIGTERM (the init's report)", e)
	}
	if out := h2.rankOutput(0); out != "resumed\n" {
		t.Errorf("restored rank's output %q, want only what it wrote after the restore", out)
	}
}
