package snapshot

import (
	"bufio"
	"bytes"
	"context"
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
	Seq     int
	Migrate bool // taken for a migration: not a restart point
	// Ranks is the job's rank count when the sequence was taken; 0 is the
	// reference's Ranks (SeqRanks). A job restarted on another rank count
	// (gompi-restart -np) checkpoints with its own, so the sequences of
	// one reference may differ (SetRanks).
	Ranks int
	// Repartition marks a sequence gompi-restart -np made from sequence
	// FromSeq for a restart on another rank count (seqranks.go).
	Repartition bool
	FromSeq     int
	Started     time.Time
	Finished    time.Time // zero until committed
	Committed   bool
	Procs       []ProcRecord
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
		writeRecord(b, "Seq", strconv.Itoa(s.Seq), seqFields(g, s)...)
		for _, p := range s.Procs {
			writeRecord(b, "Process", strconv.Itoa(p.Rank), "node", p.Node, "crs", p.CRS)
		}
		if s.Committed {
			writeRecord(b, "Committed Seq", strconv.Itoa(s.Seq), "finished", s.Finished.UTC().Format(time.RFC3339Nano))
		}
	}
	return b.Flush()
}

// ParseGlobal reads global metadata; name labels errors. Every count it
// reads is checked against what the file holds before anything is sized
// by it: a rank is below Ranks, recorded once per sequence, and a
// committed checkpoint records every rank (so Ranks cannot claim more
// ranks than the file has lines). Errors name the file and line and wrap
// ErrCorrupt.
func ParseGlobal(r io.Reader, name string) (*GlobalMeta, error) {
	p := globalParser{g: &GlobalMeta{}, name: name, seqs: map[int]bool{}}
	if err := parseMeta(r, name, globalHeader, p.record); err != nil {
		return nil, err
	}
	if err := p.close(); err != nil {
		return nil, fmt.Errorf("sstore: %w: %w", ErrCorrupt, err)
	}
	if p.g.Job == "" || p.g.Ranks == 0 {
		return nil, fmt.Errorf("sstore: %w: %s: missing Job or Ranks (a job has at least one rank)", ErrCorrupt, name)
	}
	return p.g, nil
}

// maxSeq bounds a sequence number, so that NextSeq cannot overflow.
const maxSeq = 1<<31 - 1

// errFormat is wrapped when metadata is of a format this gompi does not
// read: not damage, so not ErrCorrupt.
var errFormat = errors.New("metadata format")

// parseMeta scans a metadata file of kind: its Format record first, then
// each further record to fn. Its errors wrap ErrCorrupt, except for a
// format this gompi does not read (not damage).
func parseMeta(r io.Reader, name, kind string, fn func(record) error) error {
	header := false
	err := scanRecords(r, name, func(rec record) error {
		if header {
			return fn(rec)
		}
		header = true
		if rec.key != "Format" || rec.fields["kind"] != kind {
			return fmt.Errorf("%s: not %s", name, kind)
		}
		if rec.pos != strconv.Itoa(MetaFormat) {
			return fmt.Errorf("%s: %w %q; this gompi reads format %d", name, errFormat, rec.pos, MetaFormat)
		}
		return nil
	})
	if err == nil && !header {
		err = fmt.Errorf("%s: not %s", name, kind)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errFormat):
		return fmt.Errorf("sstore: %w", err)
	}
	return fmt.Errorf("sstore: %w: %w", ErrCorrupt, err)
}

// globalParser is ParseGlobal's state between records.
type globalParser struct {
	g     *GlobalMeta
	name  string
	cur   *SeqRecord
	seqs  map[int]bool // sequence numbers seen
	ranks map[int]bool // ranks of cur seen
	// commitLine is the line of cur's commit, which close's error names.
	commitLine int
}

func (p *globalParser) fail(rec record, format string, a ...any) error {
	return fmt.Errorf("%s:%d: %s", p.name, rec.line, fmt.Sprintf(format, a...))
}

func (p *globalParser) record(rec record) error {
	g := p.g
	switch rec.key {
	case "Job":
		g.Job = rec.pos
	case "Ranks":
		n, err := rec.atoi(rec.pos, "rank count")
		if err != nil {
			return p.fail(rec, "%v", err)
		}
		if n == 0 || g.Ranks != 0 || len(g.Seqs) > 0 {
			return p.fail(rec, "Ranks %d: want one rank count of at least 1, before the sequences", n)
		}
		g.Ranks = n
	case "AMCA":
		g.AMCA = append(g.AMCA, rec.pos)
	case "Param":
		var src mca.Source
		if err := src.UnmarshalText([]byte(rec.fields["source"])); err != nil {
			return p.fail(rec, "Param %s: %v", rec.pos, err)
		}
		g.Params = append(g.Params, mca.Setting{Name: rec.pos, Value: rec.fields["value"], Origin: mca.Origin{Source: src, Where: rec.fields["where"]}})
	case "Program", "Arg", "Export":
		if err := parseLaunchRecord(&g.Launch, rec); err != nil {
			return p.fail(rec, "%v", err)
		}
	case "Seq", "Process", "Committed Seq":
		return p.seqRecord(rec)
	default:
		return p.fail(rec, "unknown record %q", rec.key)
	}
	return nil
}

// seqRecord reads the records of a sequence.
func (p *globalParser) seqRecord(rec record) error {
	what := "sequence"
	if rec.key == "Process" {
		what = "rank"
	}
	n, err := rec.atoi(rec.pos, what)
	if err != nil {
		return p.fail(rec, "%v", err)
	}
	switch rec.key {
	case "Seq":
		if err := p.close(); err != nil {
			return err
		}
		if n > maxSeq {
			return p.fail(rec, "sequence %d: more than %d, which no reference reaches", n, maxSeq)
		}
		if p.seqs[n] {
			return p.fail(rec, "sequence %d recorded twice", n)
		}
		started, err := time.Parse(time.RFC3339Nano, rec.fields["started"])
		if err != nil {
			return p.fail(rec, "Seq %d: bad start time", n)
		}
		p.seqs[n] = true
		s, err := p.seqExtra(SeqRecord{Seq: n, Migrate: rec.fields["kind"] == "migrate", Started: started}, rec)
		if err != nil {
			return p.fail(rec, "Seq %d: %v", n, err)
		}
		p.g.Seqs = append(p.g.Seqs, s)
		p.cur, p.ranks = &p.g.Seqs[len(p.g.Seqs)-1], map[int]bool{}
	case "Process":
		switch {
		case p.cur == nil || p.cur.Committed:
			return p.fail(rec, "Process outside an open sequence")
		case p.g.Ranks == 0:
			return p.fail(rec, "Process before Ranks")
		case n >= p.g.SeqRanks(*p.cur):
			return p.fail(rec, "Process %d: the job has %d ranks (Ranks: %d)", n, p.g.SeqRanks(*p.cur), p.g.SeqRanks(*p.cur))
		case p.ranks[n]:
			return p.fail(rec, "Process %d recorded twice in sequence %d", n, p.cur.Seq)
		}
		p.ranks[n] = true
		p.cur.Procs = append(p.cur.Procs, ProcRecord{Rank: n, Node: rec.fields["node"], CRS: rec.fields["crs"]})
	case "Committed Seq":
		if p.cur == nil || p.cur.Seq != n || p.cur.Committed {
			return p.fail(rec, "commit of sequence %d does not close it", n)
		}
		fin, err := time.Parse(time.RFC3339Nano, rec.fields["finished"])
		if err != nil {
			return p.fail(rec, "Committed Seq %d: bad finish time", n)
		}
		p.cur.Committed, p.cur.Finished, p.commitLine = true, fin, rec.line
	}
	return nil
}

// close checks the sequence just read: a committed checkpoint records
// every rank of the job once (Process checked each is below Ranks and
// new), the content a restart sizes itself by. A migration records only
// the ranks it moved.
func (p *globalParser) close() error {
	s := p.cur
	if s == nil || !s.Committed || s.Migrate || len(s.Procs) == p.g.SeqRanks(*s) {
		return nil
	}
	n := p.g.SeqRanks(*s)
	return fmt.Errorf("%s:%d: committed sequence %d records %d processes but the job has %d ranks (Ranks: %d): the file was cut or edited and cannot be trusted: restore it from a copy",
		p.name, p.commitLine, s.Seq, len(s.Procs), n, n)
}

// ReadGlobal reads the global metadata of ref. A file that is not a
// regular one, or larger than MaxMetaSize, is refused before it is read.
func ReadGlobal(ref Ref) (*GlobalMeta, error) { return readGlobal(context.Background(), ref) }

// readGlobal is ReadGlobal ending with ctx's error once ctx is done, even
// in the middle of the file.
func readGlobal(ctx context.Context, ref Ref) (*GlobalMeta, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := openMeta(ref.MetaPath())
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
	g, err := ParseGlobal(fscopy.Reader{Ctx: ctx, R: f}, ref.MetaPath())
	if cerr := ctx.Err(); err != nil && cerr != nil {
		return nil, cerr
	}
	return g, err
}

// openMeta opens a metadata file with OpenFile and refuses it when larger
// than MaxMetaSize.
func openMeta(path string) (*os.File, error) {
	f, err := OpenFile(path)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || fi.Size() > MaxMetaSize {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%w: %s is %d bytes, %w", ErrCorrupt, path, fi.Size(), errTooLarge)
		}
		return nil, err
	}
	return f, nil
}

// WriteGlobal replaces the global metadata of ref atomically: readers see
// the old file or the new one, never a mix, and a crash leaves one of them.
func WriteGlobal(ref Ref, g *GlobalMeta) error {
	var buf bytes.Buffer
	if err := g.Encode(&buf); err != nil {
		return err
	}
	return WriteFileAtomic(ref.MetaPath(), buf.Bytes(), FileMode(ref.Path()))
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
// Filter, only with Compression, names the filter (FilterShuffle4,
// FilterShuffle8 or FilterDeltaShuffle8) the bytes passed before compression; metadata written
// before filters existed has none.
//
// Blocks, when set, names the file's block manifest (package
// frameworks/sstore/blocks): the file is stored as fixed blocks, those
// that changed in this sequence's pack and the others referenced in the
// packs of the older sequences From lists, which retention keeps while
// this sequence is kept (RemoveSeqsKept). Compression, Stored and Filter
// are then empty: the manifest says how each block is stored.
type FileRecord struct {
	Name        string
	Size        int64
	Checksum    string // "crc32c:<8 hex digits>"
	Compression string
	Stored      string // file name as stored, when compressed
	Filter      string
	Blocks      string // file name of the block manifest, when stored as blocks
	From        string // older sequences whose packs Blocks references: increasing, comma-separated (ParseSeqs, JoinSeqs)
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
			if f.Filter != "" {
				kv = append(kv, "filter", f.Filter)
			}
		}
		if f.Blocks != "" {
			kv = append(kv, "blocks", f.Blocks, "from", f.From)
		}
		writeRecord(b, "File", f.Name, kv...)
	}
	return b.Flush()
}

// ParseLocal reads local metadata; name labels errors. A File record
// names a file of the snapshot's own folder: a name with a folder (../x,
// /etc/x), . or .., or snapshot_meta itself is refused.
func ParseLocal(r io.Reader, name string) (*LocalMeta, error) {
	p := localParser{l: &LocalMeta{Rank: -1, CRSMeta: map[string]string{}}, name: name, seen: map[string]bool{}}
	if err := parseMeta(r, name, localHeader, p.record); err != nil {
		return nil, err
	}
	if p.l.Rank < 0 || p.l.CRS == "" {
		return nil, fmt.Errorf("sstore: %w: %s: missing Rank or CRS Component", ErrCorrupt, name)
	}
	return p.l, nil
}

// localParser is ParseLocal's state between records.
type localParser struct {
	l    *LocalMeta
	name string
	seen map[string]bool // file and stored names recorded
}

func (p *localParser) record(rec record) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%s:%d: %s", p.name, rec.line, fmt.Sprintf(format, a...))
	}
	l := p.l
	switch rec.key {
	case "Rank":
		rank, err := rec.atoi(rec.pos, "rank")
		if err != nil {
			return fail("%v", err)
		}
		pid, err := rec.atoi(rec.fields["pid"], "pid")
		if err != nil {
			return fail("%v", err)
		}
		l.Rank, l.PID, l.Node = rank, pid, rec.fields["node"]
	case "CRS Component":
		l.CRS = rec.pos
	case "Created":
		t, err := time.Parse(time.RFC3339Nano, rec.pos)
		if err != nil {
			return fail("bad time %q", rec.pos)
		}
		l.Created = t
	case "CRS Meta":
		l.CRSMeta[rec.pos] = rec.fields["value"]
	case "File":
		f, err := p.file(rec)
		if err != nil {
			return fail("%v", err)
		}
		l.Files = append(l.Files, f)
	default:
		return fail("unknown record %q", rec.key)
	}
	return nil
}

// file reads a File record.
func (p *localParser) file(rec record) (FileRecord, error) {
	if err := checkFileName(rec.pos); err != nil {
		return FileRecord{}, err
	}
	if p.seen[rec.pos] {
		return FileRecord{}, fmt.Errorf("file %q recorded twice", rec.pos)
	}
	p.seen[rec.pos] = true
	sz, err := rec.need("size")
	if err != nil {
		return FileRecord{}, err
	}
	size, err := strconv.ParseInt(sz, 10, 64)
	if err != nil || size < 0 {
		return FileRecord{}, fmt.Errorf("file %s: bad size %q", rec.pos, sz)
	}
	sum := rec.fields["checksum"]
	if _, err := parseChecksum(sum); err != nil {
		return FileRecord{}, fmt.Errorf("file %s: %v", rec.pos, err)
	}
	f := FileRecord{Name: rec.pos, Size: size, Checksum: sum, Compression: rec.fields["compression"], Stored: rec.fields["stored"], Filter: rec.fields["filter"]}
	if f.Compression == "" && f.Stored != "" {
		return FileRecord{}, fmt.Errorf("file %s: a stored name without compression", rec.pos)
	}
	if err := CheckFilter(f.Filter); err != nil {
		return FileRecord{}, fmt.Errorf("file %s: %w", rec.pos, err)
	}
	if f.Compression == "" && f.Filter != "" {
		return FileRecord{}, fmt.Errorf("file %s: filter %s without compression", rec.pos, f.Filter)
	}
	if f.Compression != "" {
		if checkFileName(f.Stored) != nil || p.seen[f.Stored] {
			return FileRecord{}, fmt.Errorf("file %s: compressed without a valid stored name", rec.pos)
		}
		p.seen[f.Stored] = true
	}
	if err := p.blocks(&f, rec); err != nil {
		return FileRecord{}, err
	}
	return f, nil
}

// blocks reads a File record's block manifest name and the older
// sequences it references.
func (p *localParser) blocks(f *FileRecord, rec record) error {
	f.Blocks = rec.fields["blocks"]
	from, hasFrom := rec.fields["from"]
	if f.Blocks == "" {
		if hasFrom {
			return fmt.Errorf("file %s: referenced sequences without a block manifest", rec.pos)
		}
		return nil
	}
	if f.Compression != "" {
		return fmt.Errorf("file %s: stored as blocks and compressed as a whole: the manifest says how each block is stored", rec.pos)
	}
	if checkFileName(f.Blocks) != nil || p.seen[f.Blocks] {
		return fmt.Errorf("file %s: stored as blocks without a valid manifest name", rec.pos)
	}
	p.seen[f.Blocks] = true
	if _, err := ParseSeqs(from); err != nil {
		return fmt.Errorf("file %s: %w", rec.pos, err)
	}
	f.From = from
	return nil
}

// maxFrom bounds the sequences one file references: a chain longer than
// this is not one a sstore_stage_full_every a user sets would give.
const maxFrom = 1 << 16

// ParseSeqs reads a list of sequence numbers as a File record's from
// field holds it: comma-separated, strictly increasing, each a sequence
// number ("" is none).
func ParseSeqs(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxFrom {
		return nil, fmt.Errorf("%d referenced sequences, more than %d", len(parts), maxFrom)
	}
	out := make([]int, 0, len(parts))
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > maxSeq || strconv.Itoa(n) != p {
			return nil, fmt.Errorf("bad referenced sequence %q", p)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("referenced sequences %q not strictly increasing", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// JoinSeqs writes sequence numbers as ParseSeqs reads them.
func JoinSeqs(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// checkFileName refuses a snapshot file name that is not one plain name
// in the snapshot's folder: a restart must read nothing outside it.
func checkFileName(name string) error {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." || name == LocalMetaFile {
		return fmt.Errorf("bad file name %q: a snapshot file is named without a folder (no /, not . or ..)", name)
	}
	return nil
}

// ReadLocal reads the snapshot_meta in dir.
func ReadLocal(dir string) (*LocalMeta, error) {
	path := filepath.Join(dir, LocalMetaFile)
	f, err := openMeta(path)
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
	return WriteFileAtomic(filepath.Join(dir, LocalMetaFile), buf.Bytes(), FileMode(dir))
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

// Filters a file's bytes may have passed through before compression (the
// File record's filter field): a byte shuffle for elements of 4 or 8
// bytes, or the differences of 8-byte elements shuffled, in blocks of
// 1 MiB (package compress implements them).
const (
	FilterShuffle4      = "shuffle4"
	FilterShuffle8      = "shuffle8"
	FilterDeltaShuffle8 = "delta-shuffle8"
)

// CheckFilter refuses a filter name this gompi does not know ("" is
// none): restoring through the wrong filter would yield other bytes.
func CheckFilter(name string) error {
	switch name {
	case "", FilterShuffle4, FilterShuffle8, FilterDeltaShuffle8:
		return nil
	}
	return fmt.Errorf("unknown filter %q (this gompi knows %s, %s and %s; written by a newer gompi?)", name, FilterShuffle4, FilterShuffle8, FilterDeltaShuffle8)
}
