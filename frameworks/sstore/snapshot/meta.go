package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gompi/frameworks/crs"
	"gompi/frameworks/filem/fscopy"
	"gompi/mca"
)

// MetaFormat is the version of the metadata format this code writes and reads.
const MetaFormat = 1

const (
	globalHeader = "gompi global snapshot metadata"
	localHeader  = "gompi local snapshot metadata"
)

// ErrCorrupt is wrapped by errors about metadata or files that do not
// match what was recorded.
var ErrCorrupt = errors.New("snapshot is damaged")

// ErrNotCommitted is wrapped when a sequence was never committed.
var ErrNotCommitted = errors.New("sequence not committed")

// GlobalMeta is the global_snapshot_meta of a reference: the job, the
// parameters it ran with, and every sequence with its state. A sequence
// counts only once Committed is set, which the global coordinator writes
// last, in an atomic replace of the whole file.
type GlobalMeta struct {
	Job    string
	Ranks  int
	AMCA   []string
	Params []mca.Setting
	Launch crs.Launch // how the ranks were started (records in launch.go)
	Seqs   []SeqRecord
}

// SeqRecord is one checkpoint sequence.
type SeqRecord struct {
	Seq       int
	Migrate   bool // taken for a migration: not a restart point
	Started   time.Time
	Finished  time.Time // zero until committed
	Committed bool
	Procs     []ProcRecord
}

// ProcRecord says where one rank's local snapshot of a sequence came from.
type ProcRecord struct {
	Rank int
	Node string
	CRS  string
}

// Seq returns the record of seq.
func (g *GlobalMeta) Seq(seq int) (*SeqRecord, bool) {
	for i := range g.Seqs {
		if g.Seqs[i].Seq == seq {
			return &g.Seqs[i], true
		}
	}
	return nil, false
}

// Committed lists the committed restart points, oldest first.
func (g *GlobalMeta) Committed() []int {
	var out []int
	for _, s := range g.Seqs {
		if s.Committed && !s.Migrate {
			out = append(out, s.Seq)
		}
	}
	sort.Ints(out)
	return out
}

// NewestTimed returns the committed restart point that finished last
// and says how long it took (Finished - Started); false when no committed
// one has both times.
func (g *GlobalMeta) NewestTimed() (SeqRecord, bool) {
	var newest SeqRecord
	found := false
	for _, s := range g.Seqs {
		if s.Committed && !s.Migrate && s.Finished.After(s.Started) && (!found || s.Finished.After(newest.Finished)) {
			newest, found = s, true
		}
	}
	return newest, found
}

// NextSeq is the number the next checkpoint of this reference takes.
func (g *GlobalMeta) NextSeq() int {
	n := 0
	for _, s := range g.Seqs {
		if s.Seq >= n {
			n = s.Seq + 1
		}
	}
	return n
}

// Encode writes the metadata in its text format.
func (g *GlobalMeta) Encode(w io.Writer) error {
	b := bufio.NewWriter(w)
	writeRecord(b, "Format", strconv.Itoa(MetaFormat), "kind", globalHeader)
	writeRecord(b, "Job", g.Job)
	writeRecord(b, "Ranks", strconv.Itoa(g.Ranks))
	for _, a := range g.AMCA {
		writeRecord(b, "AMCA", a)
	}
	for _, p := range g.Params {
		writeRecord(b, "Param", p.Name, "value", p.Value, "source", p.Origin.Source.String(), "where", p.Origin.Where)
	}
	encodeLaunch(b, g.Launch)
	for _, s := range g.Seqs {
		kind := "checkpoint"
		if s.Migrate {
			kind = "migrate"
		}
		writeRecord(b, "Seq", strconv.Itoa(s.Seq), "kind", kind, "started", s.Started.UTC().Format(time.RFC3339Nano))
		for _, p := range s.Procs {
			writeRecord(b, "Process", strconv.Itoa(p.Rank), "node", p.Node, "crs", p.CRS)
		}
		if s.Committed {
			writeRecord(b, "Committed Seq", strconv.Itoa(s.Seq), "finished", s.Finished.UTC().Format(time.RFC3339Nano))
		}
	}
	return b.Flush()
}

// ParseGlobal reads global metadata; name labels errors.
func ParseGlobal(r io.Reader, name string) (*GlobalMeta, error) {
	recs, err := readRecords(r, name)
	if err != nil {
		return nil, fmt.Errorf("sstore: %w: %w", ErrCorrupt, err)
	}
	g := &GlobalMeta{}
	fail := func(rec record, format string, a ...any) (*GlobalMeta, error) {
		return nil, fmt.Errorf("sstore: %w: %s:%d: %s", ErrCorrupt, name, rec.line, fmt.Sprintf(format, a...))
	}
	if len(recs) == 0 || recs[0].key != "Format" || recs[0].fields["kind"] != globalHeader {
		return nil, fmt.Errorf("sstore: %w: %s: not gompi global snapshot metadata", ErrCorrupt, name)
	}
	if recs[0].pos != strconv.Itoa(MetaFormat) {
		return nil, fmt.Errorf("sstore: %s: metadata format %q; this gompi reads format %d", name, recs[0].pos, MetaFormat)
	}
	var cur *SeqRecord
	for _, rec := range recs[1:] {
		switch rec.key {
		case "Job":
			g.Job = rec.pos
		case "Ranks":
			n, err := rec.atoi(rec.pos, "rank count")
			if err != nil {
				return fail(rec, "%v", err)
			}
			g.Ranks = n
		case "AMCA":
			g.AMCA = append(g.AMCA, rec.pos)
		case "Param":
			var src mca.Source
			if err := src.UnmarshalText([]byte(rec.fields["source"])); err != nil {
				return fail(rec, "Param %s: %v", rec.pos, err)
			}
			g.Params = append(g.Params, mca.Setting{Name: rec.pos, Value: rec.fields["value"], Origin: mca.Origin{Source: src, Where: rec.fields["where"]}})
		case "Program", "Arg", "Export":
			if err := parseLaunchRecord(&g.Launch, rec); err != nil {
				return fail(rec, "%v", err)
			}
		case "Seq":
			n, err := rec.atoi(rec.pos, "sequence")
			if err != nil {
				return fail(rec, "%v", err)
			}
			if _, dup := g.Seq(n); dup {
				return fail(rec, "sequence %d recorded twice", n)
			}
			started, err := time.Parse(time.RFC3339Nano, rec.fields["started"])
			if err != nil {
				return fail(rec, "Seq %d: bad start time", n)
			}
			g.Seqs = append(g.Seqs, SeqRecord{Seq: n, Migrate: rec.fields["kind"] == "migrate", Started: started})
			cur = &g.Seqs[len(g.Seqs)-1]
		case "Process":
			if cur == nil || cur.Committed {
				return fail(rec, "Process outside an open sequence")
			}
			rank, err := rec.atoi(rec.pos, "rank")
			if err != nil {
				return fail(rec, "%v", err)
			}
			cur.Procs = append(cur.Procs, ProcRecord{Rank: rank, Node: rec.fields["node"], CRS: rec.fields["crs"]})
		case "Committed Seq":
			n, err := rec.atoi(rec.pos, "sequence")
			if err != nil {
				return fail(rec, "%v", err)
			}
			if cur == nil || cur.Seq != n || cur.Committed {
				return fail(rec, "commit of sequence %d does not close it", n)
			}
			fin, err := time.Parse(time.RFC3339Nano, rec.fields["finished"])
			if err != nil {
				return fail(rec, "Committed Seq %d: bad finish time", n)
			}
			cur.Committed, cur.Finished = true, fin
		default:
			return fail(rec, "unknown record %q", rec.key)
		}
	}
	if g.Job == "" || g.Ranks == 0 {
		return nil, fmt.Errorf("sstore: %w: %s: missing Job or Ranks", ErrCorrupt, name)
	}
	return g, nil
}

// ReadGlobal reads the global metadata of ref.
func ReadGlobal(ref Ref) (*GlobalMeta, error) {
	f, err := os.Open(ref.MetaPath())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, derr := os.Stat(ref.Path()); derr != nil {
				return nil, fmt.Errorf("sstore: no snapshot reference %s: %w", ref.Path(), err)
			}
			return nil, fmt.Errorf("sstore: %s has no %s: not a gompi snapshot reference, or its metadata was lost: %w", ref.Path(), GlobalMetaFile, err)
		}
		return nil, fmt.Errorf("sstore: %w", err)
	}
	defer f.Close()
	return ParseGlobal(f, ref.MetaPath())
}

// WriteGlobal replaces the global metadata of ref atomically: readers see
// the old file or the new one, never a mix, and a crash leaves one of them.
func WriteGlobal(ref Ref, g *GlobalMeta) error {
	var buf bytes.Buffer
	if err := g.Encode(&buf); err != nil {
		return err
	}
	return WriteFileAtomic(ref.MetaPath(), buf.Bytes(), 0o644)
}

// WriteFileAtomic writes data to path through a temporary file in the same
// directory, fsynced, renamed into place, with the directory fsynced.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("sstore: write %s: %w", path, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("sstore: write %s: %w", path, err)
	}
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("sstore: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sstore: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sstore: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("sstore: write %s: %w", path, err)
	}
	ok = true
	if err := fscopy.SyncDir(dir); err != nil {
		return fmt.Errorf("sstore: write %s: sync directory: %w", path, err)
	}
	return nil
}

// LocalMeta is the snapshot_meta of one rank's local snapshot.
type LocalMeta struct {
	Rank    int
	PID     int
	Node    string
	CRS     string
	Created time.Time
	CRSMeta map[string]string
	Files   []FileRecord
}

// FileRecord is one file of a local snapshot with its size and checksum.
// Compression names how the file is stored ("" = as is); Size and Checksum
// are those of the original bytes, so restart verifies what it hands the CRS.
type FileRecord struct {
	Name        string
	Size        int64
	Checksum    string // "crc32c:<8 hex digits>"
	Compression string
	Stored      string // file name as stored, when compressed
}

// Encode writes the local metadata.
func (l *LocalMeta) Encode(w io.Writer) error {
	b := bufio.NewWriter(w)
	writeRecord(b, "Format", strconv.Itoa(MetaFormat), "kind", localHeader)
	writeRecord(b, "Rank", strconv.Itoa(l.Rank), "pid", strconv.Itoa(l.PID), "node", l.Node)
	writeRecord(b, "CRS Component", l.CRS)
	writeRecord(b, "Created", l.Created.UTC().Format(time.RFC3339Nano))
	keys := make([]string, 0, len(l.CRSMeta))
	for k := range l.CRSMeta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		writeRecord(b, "CRS Meta", k, "value", l.CRSMeta[k])
	}
	for _, f := range l.Files {
		kv := []string{"size", strconv.FormatInt(f.Size, 10), "checksum", f.Checksum}
		if f.Compression != "" {
			kv = append(kv, "compression", f.Compression, "stored", f.Stored)
		}
		writeRecord(b, "File", f.Name, kv...)
	}
	return b.Flush()
}

// ParseLocal reads local metadata; name labels errors.
func ParseLocal(r io.Reader, name string) (*LocalMeta, error) {
	recs, err := readRecords(r, name)
	if err != nil {
		return nil, fmt.Errorf("sstore: %w: %w", ErrCorrupt, err)
	}
	fail := func(rec record, format string, a ...any) (*LocalMeta, error) {
		return nil, fmt.Errorf("sstore: %w: %s:%d: %s", ErrCorrupt, name, rec.line, fmt.Sprintf(format, a...))
	}
	if len(recs) == 0 || recs[0].key != "Format" || recs[0].fields["kind"] != localHeader {
		return nil, fmt.Errorf("sstore: %w: %s: not gompi local snapshot metadata", ErrCorrupt, name)
	}
	if recs[0].pos != strconv.Itoa(MetaFormat) {
		return nil, fmt.Errorf("sstore: %s: metadata format %q; this gompi reads format %d", name, recs[0].pos, MetaFormat)
	}
	l := &LocalMeta{Rank: -1, CRSMeta: map[string]string{}}
	seen := map[string]bool{}
	for _, rec := range recs[1:] {
		switch rec.key {
		case "Rank":
			rank, err := rec.atoi(rec.pos, "rank")
			if err != nil {
				return fail(rec, "%v", err)
			}
			pid, err := rec.atoi(rec.fields["pid"], "pid")
			if err != nil {
				return fail(rec, "%v", err)
			}
			l.Rank, l.PID, l.Node = rank, pid, rec.fields["node"]
		case "CRS Component":
			l.CRS = rec.pos
		case "Created":
			t, err := time.Parse(time.RFC3339Nano, rec.pos)
			if err != nil {
				return fail(rec, "bad time %q", rec.pos)
			}
			l.Created = t
		case "CRS Meta":
			l.CRSMeta[rec.pos] = rec.fields["value"]
		case "File":
			if rec.pos == "" || rec.pos != filepath.Base(rec.pos) || rec.pos == "." || rec.pos == ".." || rec.pos == LocalMetaFile {
				return fail(rec, "bad file name %q", rec.pos)
			}
			if seen[rec.pos] {
				return fail(rec, "file %q recorded twice", rec.pos)
			}
			seen[rec.pos] = true
			sz, err := rec.need("size")
			if err != nil {
				return fail(rec, "%v", err)
			}
			size, err := strconv.ParseInt(sz, 10, 64)
			if err != nil || size < 0 {
				return fail(rec, "file %s: bad size %q", rec.pos, sz)
			}
			sum := rec.fields["checksum"]
			if _, err := parseChecksum(sum); err != nil {
				return fail(rec, "file %s: %v", rec.pos, err)
			}
			f := FileRecord{Name: rec.pos, Size: size, Checksum: sum, Compression: rec.fields["compression"], Stored: rec.fields["stored"]}
			if f.Compression != "" && (f.Stored == "" || f.Stored != filepath.Base(f.Stored) || seen[f.Stored]) {
				return fail(rec, "file %s: compressed without a valid stored name", rec.pos)
			}
			l.Files = append(l.Files, f)
		default:
			return fail(rec, "unknown record %q", rec.key)
		}
	}
	if l.Rank < 0 || l.CRS == "" {
		return nil, fmt.Errorf("sstore: %w: %s: missing Rank or CRS Component", ErrCorrupt, name)
	}
	return l, nil
}

// ReadLocal reads the snapshot_meta in dir.
func ReadLocal(dir string) (*LocalMeta, error) {
	path := filepath.Join(dir, LocalMetaFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sstore: local snapshot %s: %w", dir, err)
	}
	defer f.Close()
	return ParseLocal(f, path)
}

// WriteLocal writes the snapshot_meta in dir atomically.
func WriteLocal(dir string, l *LocalMeta) error {
	var buf bytes.Buffer
	if err := l.Encode(&buf); err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dir, LocalMetaFile), buf.Bytes(), 0o644)
}

// parseChecksum checks the "crc32c:<hex>" form.
func parseChecksum(s string) (uint32, error) {
	hex, ok := strings.CutPrefix(s, "crc32c:")
	if !ok || len(hex) != 8 {
		return 0, fmt.Errorf("checksum %q is not crc32c:<8 hex digits>", s)
	}
	v, err := strconv.ParseUint(hex, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("checksum %q is not crc32c:<8 hex digits>", s)
	}
	return uint32(v), nil
}
