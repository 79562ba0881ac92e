package restart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gompi/cr"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mpi"
)

// A restart on another rank count (gompi-restart -np M) of a sequence of
// N ranks. gompi-restart checks that the sequence can be redistributed
// (why not, else), then records a repartition sequence in the reference:
// for each new rank a local snapshot holding a fresh library state for a
// world of M ranks and, hard-linked (no byte copied), the app.state of
// every old rank; package cr's restart reads from them only what each new
// rank needs. The job is then restarted from that sequence as from any
// other, and checkpoints on into the reference. A repartition sequence is
// a restart point of M ranks of its own: restarting it again needs no -np,
// and removing the sequence it was made from leaves it whole.

// errNotRedistributable is wrapped by the refusals of a restart on
// another rank count.
var errNotRedistributable = errors.New("cannot restart on another rank count")

// repartition returns the restart point of point's job on np ranks:
// point itself when it has np ranks, a repartition sequence of it made
// earlier for np, or one made now.
func repartition(ctx context.Context, stderr io.Writer, point snapshot.RestartPoint, np int, overrides []string) (snapshot.RestartPoint, error) {
	meta := point.Meta
	if meta.SeqRanks(point.Seq) == np {
		return point, nil
	}
	if point.Seq.Repartition {
		// A repartition of a repartition would link links: start from the
		// sequence it was made from.
		src, err := snapshot.ChooseSeq(point.Ref, meta, point.Seq.FromSeq)
		if err != nil {
			return point, fmt.Errorf("sequence %d was made from sequence %d for %d ranks: %w", point.Seq.Seq, point.Seq.FromSeq, meta.SeqRanks(point.Seq), err)
		}
		return repartition(ctx, stderr, src, np, overrides)
	}
	for _, s := range meta.Seqs {
		if s.Repartition && s.FromSeq == point.Seq.Seq && s.IsRestartPoint() && meta.SeqRanks(s) == np {
			fmt.Fprintf(stderr, "gompi-restart: sequence %d is sequence %d repartitioned for %d ranks already\n", s.Seq, point.Seq.Seq, np)
			return snapshot.RestartPoint{Ref: point.Ref, Meta: meta, Seq: s}, nil
		}
	}
	n := meta.SeqRanks(point.Seq)
	if err := checkStorage(point.Meta, overrides); err != nil {
		return point, fmt.Errorf("%w from %d to %d ranks: %w", errNotRedistributable, n, np, err)
	}
	if err := checkRedistributable(point); err != nil {
		return point, fmt.Errorf("%w from %d to %d ranks: sequence %d of %s: %w", errNotRedistributable, n, np, point.Seq.Seq, point.Ref, err)
	}
	if err := ctx.Err(); err != nil {
		return point, err
	}
	seq, err := writeRepartition(point, np)
	if err != nil {
		return point, fmt.Errorf("repartition sequence %d of %s for %d ranks: %w", point.Seq.Seq, point.Ref, np, err)
	}
	fmt.Fprintf(stderr, "gompi-restart: sequence %d of %d ranks repartitioned for %d ranks as sequence %d\n", point.Seq.Seq, n, np, seq.Seq)
	return snapshot.RestartPoint{Ref: point.Ref, Meta: point.Meta, Seq: seq}, nil
}

// checkRedistributable says why point cannot be restarted on another rank
// count: it was not saved by crs=self, or its files are not on this
// node's global storage as they are, or a rank's library state holds
// messages or communicators a world of another size cannot take, or the
// program's state is not declared redistributable.
func checkRedistributable(point snapshot.RestartPoint) error {
	if point.Ref.IsRemote() {
		return fmt.Errorf("the reference is remote; each new rank reads the old ranks' files in place: copy the reference to this node (or a shared file system) first")
	}
	if name := savedBy(point.Seq); name != "self" {
		return fmt.Errorf("it was saved by crs=%s: a restart on another rank count rebuilds the program's state from what it declared with package cr, which only crs=self saves (crs=criu saves whole processes, laid out for their rank count)", orNone(name))
	}
	layouts := make([]cr.Layout, len(point.Seq.Procs))
	for _, p := range point.Seq.Procs {
		dir := point.Ref.LocalPath(point.Seq.Seq, p.Rank)
		l, err := snapshot.ReadLocal(dir)
		if err != nil {
			return err
		}
		if err := checkFiles(dir, l); err != nil {
			return err
		}
		if err := checkLibrary(dir, p.Rank); err != nil {
			return err
		}
		if layouts[p.Rank], err = cr.ReadLayout(filepath.Join(dir, cr.AppStateFile)); err != nil {
			return err
		}
	}
	return cr.CheckRedistributable(layouts)
}

// checkStorage refuses to restart a repartition through sstore stage,
// which copies each rank's folder to its node: a repartitioned rank's
// links every old rank's file, and would be copied whole to every node.
func checkStorage(meta *snapshot.GlobalMeta, overrides []string) error {
	store := ""
	for _, s := range meta.Params {
		if s.Name == sstore.Name {
			store = s.Value
		}
	}
	for _, kv := range overrides {
		if name, value, _ := strings.Cut(kv, "="); strings.TrimSpace(name) == sstore.Name {
			store = strings.TrimSpace(value)
		}
	}
	if store == "stage" {
		return fmt.Errorf("the job ran with sstore stage, which copies each rank's snapshot to its node, and a new rank's links all the old ranks' files: restart with --mca sstore central, which the new ranks read in place")
	}
	return nil
}

func orNone(name string) string {
	if name == "" {
		return "a mix of CRSs"
	}
	return name
}

// checkFiles refuses a local snapshot with files a new rank could not
// read in place (stored compressed or as blocks of a differential
// checkpoint) or that are the rank's alone (an OnCheckpoint callback's).
func checkFiles(dir string, l *snapshot.LocalMeta) error {
	for _, f := range l.Files {
		switch {
		case f.Compression != "":
			return fmt.Errorf("%s is stored compressed (%s): a new rank reads the old ranks' runs in place; restart from a sequence on global storage as it was written (sstore central)", filepath.Join(dir, f.Name), f.Compression)
		case f.Blocks != "":
			return fmt.Errorf("%s is stored as blocks of a differential checkpoint (manifest %s): a new rank reads the old ranks' runs in place; restart from a sequence written with sstore_stage_differential off", filepath.Join(dir, f.Name), f.Blocks)
		case f.Name != cr.AppStateFile && f.Name != snapc.LibraryStateFile:
			return fmt.Errorf("%s was written by an OnCheckpoint callback: such files are the rank's own and cannot be redistributed; save that state with cr.ProtectDistributed, ProtectReplicated or ProtectFunc", filepath.Join(dir, f.Name))
		}
	}
	return nil
}

// checkLibrary refuses a rank whose library state holds what a world of
// another size cannot take.
func checkLibrary(dir string, rank int) error {
	b, err := mpi.ReadLibraryState(dir)
	if err != nil {
		return err
	}
	s, err := mpi.SummarizeLibraryState(b)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, snapc.LibraryStateFile), err)
	}
	switch {
	case s.Drained > 0:
		return fmt.Errorf("rank %d's library state holds %d drained messages (in flight when the checkpoint was taken, to be delivered after the restart to ranks that no longer exist as such): restart on another rank count from a sequence taken where no message is in flight, or on %d ranks", rank, s.Drained, s.Size)
	case len(s.Communicators) > 0:
		return fmt.Errorf("rank %d's library state holds communicators the program made (Dup, Split, ...; handles %v), which are not rebuilt on another rank count: free them before the safe point the checkpoint is taken at (and make them again after it), or restart on %d ranks", rank, s.Communicators, s.Size)
	}
	return nil
}

// writeRepartition records in point's reference a repartition sequence of
// np ranks made from point, and returns it.
func writeRepartition(point snapshot.RestartPoint, np int) (snapshot.SeqRecord, error) {
	ref, meta, old := point.Ref, point.Meta, point.Seq
	seq := snapshot.SeqRecord{Seq: meta.NextSeq(), Ranks: np, Repartition: true, FromSeq: old.Seq, Started: time.Now()}
	dir := ref.SeqDir(seq.Seq)
	if err := os.Mkdir(dir, snapshot.DirMode(ref.Path())); err != nil {
		return seq, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	apps := make([]snapshot.FileRecord, len(old.Procs))
	for _, p := range old.Procs {
		l, err := snapshot.ReadLocal(ref.LocalPath(old.Seq, p.Rank))
		if err != nil {
			return seq, err
		}
		i := slices.IndexFunc(l.Files, func(f snapshot.FileRecord) bool { return f.Name == cr.AppStateFile })
		if i < 0 {
			return seq, fmt.Errorf("%w: rank %d's local snapshot records no %s", snapshot.ErrCorrupt, p.Rank, cr.AppStateFile)
		}
		apps[p.Rank] = l.Files[i]
	}
	for j := range np {
		node := old.Procs[j*len(old.Procs)/np].Node
		if err := writeNewRank(ref, old, seq.Seq, j, np, node, apps); err != nil {
			return seq, fmt.Errorf("new rank %d: %w", j, err)
		}
		seq.Procs = append(seq.Procs, snapshot.ProcRecord{Rank: j, Node: node, CRS: "self"})
	}
	seq.Finished, seq.Committed = time.Now(), true
	meta.Seqs = append(meta.Seqs, seq)
	if err := snapshot.WriteGlobal(ref, meta); err != nil {
		meta.Seqs = meta.Seqs[:len(meta.Seqs)-1]
		return seq, err
	}
	ok = true
	return seq, nil
}

// writeNewRank writes new rank j's local snapshot: a fresh library state,
// the old ranks' app.state linked in, and its metadata.
func writeNewRank(ref snapshot.Ref, old snapshot.SeqRecord, seq, j, np int, node string, apps []snapshot.FileRecord) error {
	dir := ref.LocalPath(seq, j)
	if err := os.Mkdir(dir, snapshot.DirMode(ref.SeqDir(seq))); err != nil {
		return err
	}
	lib, err := mpi.FreshLibraryState(j, np)
	if err != nil {
		return err
	}
	w, err := snapshot.CreateFile(dir, snapc.LibraryStateFile)
	if err != nil {
		return err
	}
	if _, err := w.Write(lib); err != nil {
		w.Abort()
		return err
	}
	rec, err := w.Close()
	if err != nil {
		return err
	}
	files := []snapshot.FileRecord{rec}
	for k, app := range apps {
		name := cr.SourceFile(k)
		if err := os.Link(filepath.Join(ref.LocalPath(old.Seq, k), cr.AppStateFile), filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("link rank %d's state in (the new ranks share the old files, never copied): %w", k, err)
		}
		files = append(files, snapshot.FileRecord{Name: name, Size: app.Size, Checksum: app.Checksum})
	}
	host, _ := os.Hostname()
	if node == "" {
		node = host
	}
	return snapshot.WriteLocal(dir, &snapshot.LocalMeta{Rank: j, Node: node, CRS: "self", Created: time.Now(), Files: files,
		CRSMeta: map[string]string{cr.MetaFromRanks: strconv.Itoa(len(apps)), cr.MetaFromSeq: strconv.Itoa(old.Seq)}})
}

// NormalizeArgs rewrites Open MPI's -np N (and -np=N) into --np, which the
// flag parser takes (up to a --).
func NormalizeArgs(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if a == "-np" || strings.HasPrefix(a, "-np=") {
			out[i] = "-" + a
		}
	}
	return out
}
