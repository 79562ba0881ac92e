package restart

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gompi/cr"
	"gompi/cr/crtest"
	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// The repartition of sequences in-process: ranks of mpitest with package
// cr, checkpointed by crtest's coordinator, then repartitioned and
// restarted on another rank count.

const (
	arrayLen = 23 // elements of the distributed array: no rank count divides it
	lastStep = 6
)

// distProg is a program whose state is declared redistributable: an
// array split unevenly (rank r holds a share growing with r), its step
// replicated, and a list with its own redistribution (the old ranks'
// lists joined). Every step adds 1 to each element. At the end each rank
// checks its elements are their global index plus lastStep and, once
// restarted, that its list holds wantList entries.
func distProg(wantList int) func(p *mpi.Proc) error {
	return func(p *mpi.Proc) error {
		c, err := cr.For(p)
		if err != nil {
			return err
		}
		n, r := p.Size(), p.Rank()
		at := func(r int) int { return arrayLen * (r * (r + 1) / 2) / (n * (n + 1) / 2) }
		lo, hi := at(r), at(r+1)
		a := make([]int64, hi-lo)
		for i := range a {
			a[i] = int64(lo + i)
		}
		step, totals := 1, []int{r}
		if err := c.ProtectDistributed("a", &a, cr.Block{Global: arrayLen, Lo: lo}); err != nil {
			return err
		}
		if err := c.ProtectReplicated("step", &step); err != nil {
			return err
		}
		err = c.ProtectFunc("totals", &totals, func(s cr.Saved) error {
			for k := range s.Ranks() {
				var v []int
				if err := s.Decode(k, &v); err != nil {
					return err
				}
				totals = append(totals, v...)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for ; step <= lastStep; step++ {
			if err := c.SafePoint(); err != nil {
				return err
			}
			for i := range a {
				a[i]++
			}
			if err := p.World().Barrier(); err != nil {
				return err
			}
		}
		for i, v := range a {
			if v != int64(lo+i+lastStep) {
				return fmt.Errorf("rank %d of %d: element %d is %d, want %d", r, n, lo+i, v, lo+i+lastStep)
			}
		}
		if c.IsRestart() && len(totals) != wantList {
			return fmt.Errorf("rank %d: redistributed list %v, want %d entries", r, totals, wantList)
		}
		return nil
	}
}

// checkpointed runs prog on n ranks checkpointed at safe point 3 and
// returns the job and the restart point.
func checkpointed(t *testing.T, n int, prog func(p *mpi.Proc) error) (*crtest.Job, snapshot.RestartPoint) {
	t.Helper()
	j := crtest.NewJob(n, t.TempDir(), "ntom")
	wait := j.StartAt(3, crs.Options{})
	mpitest.RunWith(t, j.Config("tcp"), prog)
	res, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	return j, pointOf(t, j.Ref(), res.Seq)
}

func pointOf(t *testing.T, ref snapshot.Ref, seq int) snapshot.RestartPoint {
	t.Helper()
	g, err := snapshot.ReadGlobal(ref)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := snapshot.ChooseSeq(ref, g, seq)
	if err != nil {
		t.Fatal(err)
	}
	return pt
}

// TestRepartitionRestart: a job of 3 ranks restarts on 5, then that job's
// own checkpoint on 2, each finishing with the values of an uninterrupted
// run; the repartition links the old files, and is made once per count.
func TestRepartitionRestart(t *testing.T) {
	j, pt := checkpointed(t, 3, distProg(3))
	np, err := repartition(t.Context(), io.Discard, pt, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !np.Seq.Repartition || np.Seq.FromSeq != pt.Seq.Seq || np.Meta.SeqRanks(np.Seq) != 5 || len(np.Seq.Procs) != 5 {
		t.Fatalf("repartition sequence %+v", np.Seq)
	}
	// The new ranks share the old files: no byte copied.
	old, _ := os.Stat(filepath.Join(pt.Ref.LocalPath(pt.Seq.Seq, 2), cr.AppStateFile))
	for r := range 5 {
		linked, err := os.Stat(filepath.Join(pt.Ref.LocalPath(np.Seq.Seq, r), cr.SourceFile(2)))
		if err != nil || !os.SameFile(old, linked) {
			t.Fatalf("rank %d: %v: the old app.state is not linked in", r, err)
		}
	}
	again, err := repartition(t.Context(), io.Discard, pointOf(t, pt.Ref, pt.Seq.Seq), 5, nil)
	if err != nil || again.Seq.Seq != np.Seq.Seq {
		t.Fatalf("second repartition for 5 ranks: sequence %d, %v; want %d again", again.Seq.Seq, err, np.Seq.Seq)
	}

	nj, err := j.RestartOn(np.Seq.Seq, 5)
	if err != nil {
		t.Fatal(err)
	}
	wait := nj.StartAt(5, crs.Options{})
	mpitest.RunWith(t, nj.Config("tcp"), distProg(3))
	res, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	// The job of 5 checkpointed into the same reference; restart that on 2.
	pt5 := pointOf(t, pt.Ref, res.Seq)
	first, _ := pt5.Meta.Seq(pt.Seq.Seq)
	if pt5.Meta.Ranks != 5 || pt5.Meta.SeqRanks(pt5.Seq) != 5 || pt5.Meta.SeqRanks(*first) != 3 {
		t.Fatalf("after the job of 5 checkpointed: Ranks %d, its sequence of %d, the first of %d", pt5.Meta.Ranks, pt5.Meta.SeqRanks(pt5.Seq), pt5.Meta.SeqRanks(*first))
	}
	np2, err := repartition(t.Context(), io.Discard, pt5, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	nj2, err := nj.RestartOn(np2.Seq.Seq, 2)
	if err != nil {
		t.Fatal(err)
	}
	mpitest.RunWith(t, nj2.Config("tcp"), distProg(15))
}

// TestRepartitionRefused: what cannot be restarted on another rank count
// is refused, saying why.
func TestRepartitionRefused(t *testing.T) {
	tests := []struct {
		name string
		prog func(p *mpi.Proc) error
		edit func(pt *snapshot.RestartPoint)
		want string
	}{
		{"drained messages", drainedProg, nil, "rank 1's library state holds 1 drained messages"},
		{"plain value", plainProg, nil, `the program saved "seed" with cr.Protect`},
		{"communicator", commProg, nil, "rank 0's library state holds communicators the program made"},
		{"crs criu", distProg(2), func(pt *snapshot.RestartPoint) {
			for i := range pt.Seq.Procs {
				pt.Seq.Procs[i].CRS = "criu"
			}
		}, "it was saved by crs=criu"},
		{"callback file", callbackProg, nil, "was written by an OnCheckpoint callback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, pt := checkpointed(t, 2, tt.prog)
			if tt.edit != nil {
				tt.edit(&pt)
			}
			_, err := repartition(t.Context(), io.Discard, pt, 3, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "cannot restart on another rank count from 2 to 3 ranks: sequence 0 of") {
				t.Fatalf("repartition: %v, want %q", err, tt.want)
			}
			if g, _ := snapshot.ReadGlobal(pt.Ref); len(g.Seqs) != 1 {
				t.Errorf("a refused repartition recorded a sequence: %+v", g.Seqs)
			}
			if _, err := os.Stat(pt.Ref.SeqDir(1)); err == nil {
				t.Errorf("a refused repartition left %s", pt.Ref.SeqDir(1))
			}
		})
	}
}

// drainedProg has a message of rank 0's in flight at every safe point
// after the first: rank 1 receives it only after the next one.
func drainedProg(p *mpi.Proc) error {
	c, err := cr.For(p)
	if err != nil {
		return err
	}
	w, buf := p.World(), []int64{0}
	step := 1
	if err := c.ProtectReplicated("step", &step); err != nil {
		return err
	}
	for ; step <= lastStep; step++ {
		if err := c.SafePoint(); err != nil {
			return err
		}
		switch {
		case p.Rank() == 0:
			err = mpi.SendT(w, buf, 1, step)
		case step > 1:
			_, err = mpi.RecvT(w, buf, 0, step-1)
		}
		if err != nil {
			return err
		}
	}
	if p.Rank() == 1 {
		_, err = mpi.RecvT(w, buf, 0, lastStep)
	}
	return err
}

// plainProg saves a value with Protect.
func plainProg(p *mpi.Proc) error {
	c, err := cr.For(p)
	if err != nil {
		return err
	}
	seed := p.Rank()
	if err := c.Protect("seed", &seed); err != nil {
		return err
	}
	return steps(c)
}

// commProg keeps a communicator it split across its safe points.
func commProg(p *mpi.Proc) error {
	c, err := cr.For(p)
	if err != nil {
		return err
	}
	sub, err := p.World().Split(0, p.Rank())
	if err != nil {
		return err
	}
	if err := steps(c); err != nil {
		return err
	}
	return sub.Free()
}

// callbackProg writes a file of its own at each checkpoint.
func callbackProg(p *mpi.Proc) error {
	c, err := cr.For(p)
	if err != nil {
		return err
	}
	err = c.OnCheckpoint(func(dir string) error { return os.WriteFile(filepath.Join(dir, "extra"), []byte("x"), 0o600) })
	if err != nil {
		return err
	}
	return steps(c)
}

func steps(c *cr.Coordinator) error {
	for range lastStep {
		if err := c.SafePoint(); err != nil {
			return err
		}
	}
	return nil
}

// TestRepartitionNotLocal: a remote reference is refused: the new ranks
// read the old ranks' files in place.
func TestRepartitionNotLocal(t *testing.T) {
	_, pt := checkpointed(t, 2, distProg(2))
	pt.Ref.Dir = "sftp://host/x"
	if _, err := repartition(t.Context(), io.Discard, pt, 3, nil); err == nil || !strings.Contains(err.Error(), "the reference is remote") {
		t.Fatalf("remote: %v", err)
	}
}

func TestNormalizeArgs(t *testing.T) {
	got := NormalizeArgs([]string{"-np", "4", "-s", "1", "-np=2", "ref", "--", "-np"})
	want := []string{"--np", "4", "-s", "1", "--np=2", "ref", "--", "-np"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("NormalizeArgs = %q, want %q", got, want)
	}
}

// TestCheckStorage: a job that ran with sstore stage is restarted on
// another rank count only with sstore central named.
func TestCheckStorage(t *testing.T) {
	stage := &snapshot.GlobalMeta{Params: []mca.Setting{{Name: "sstore", Value: "stage"}}}
	tests := []struct {
		meta      *snapshot.GlobalMeta
		overrides []string
		refused   bool
	}{
		{&snapshot.GlobalMeta{}, nil, false},
		{stage, nil, true},
		{stage, []string{"sstore=central"}, false},
		{&snapshot.GlobalMeta{}, []string{"btl=tcp", "sstore = stage"}, true},
	}
	for _, tt := range tests {
		err := checkStorage(tt.meta, tt.overrides)
		if (err != nil) != tt.refused || (err != nil && !strings.Contains(err.Error(), "restart with --mca sstore central")) {
			t.Errorf("params %v, overrides %q: %v", tt.meta.Params, tt.overrides, err)
		}
	}
}

func TestCheckFiles(t *testing.T) {
	tests := []struct {
		name string
		file snapshot.FileRecord
		want string // "" when accepted
	}{
		{"plain state", snapshot.FileRecord{Name: cr.AppStateFile}, ""},
		{"library state", snapshot.FileRecord{Name: snapc.LibraryStateFile}, ""},
		{"compressed", snapshot.FileRecord{Name: cr.AppStateFile, Compression: "zstd"}, "stored compressed (zstd)"},
		{"blocks", snapshot.FileRecord{Name: cr.AppStateFile, Blocks: "app.state.blocks"}, "stored as blocks of a differential checkpoint"},
		{"callback file", snapshot.FileRecord{Name: "mine.dat"}, "written by an OnCheckpoint callback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkFiles("/snap/0/rank.0", &snapshot.LocalMeta{Files: []snapshot.FileRecord{tt.file}})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("checkFiles: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("checkFiles: %v, want %q", err, tt.want)
			}
		})
	}
}
