package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	pathpkg "path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"gompi/frameworks/filem"
	"gompi/mca"
)

// The per-user index of remote references: where each reference a
// checkpoint wrote to a remote folder lives, and the FileM settings that
// reach it, so that `gompi-restart NAME` finds it and reads it without the
// user repeating them. It records names, locations and the paths of files
// (known_hosts, identity): never a key's contents or a password, which no
// parameter it keeps can hold. The file is its owner's alone (0600 in a
// 0700 folder) and is not read when someone else could have written it:
// it decides which host a restart trusts.
//
// One line per reference, fields separated by tabs:
//
//	# gompi snapshot index
//	gompi_global_snapshot_1a2b.ckpt	sftp://alice@node7:2222/scratch	filem=sftp	filem_sftp_known_hosts=/home/alice/.ssh/known_hosts
const (
	indexHeader = "# gompi snapshot index: reference, its folder, the FileM settings that reach it (no credentials)"
	// Bounds on what is read back: far above what a user's references
	// need, far below what could hurt.
	maxIndexSize    = 1 << 20
	maxIndexLine    = 4 << 10
	maxIndexEntries = 4096
)

// IndexParams are the parameters an index entry may keep: which FileM,
// and the non-secret settings of sftp (paths of files, not their
// contents; user and port are in the location).
var IndexParams = []string{filem.Name, filem.ParamSFTPKnownHosts, filem.ParamSFTPIdentity}

// IndexEntry is one remote reference in the index.
type IndexEntry struct {
	Name     string        // the reference's name, gompi_global_snapshot_<job>.ckpt
	Dir      string        // its folder, a remote location (Ref.Dir)
	Settings []mca.Setting // of IndexParams only; Origin names the index's line when read
}

// Ref is the reference the entry names.
func (e IndexEntry) Ref() Ref { return Ref{Dir: e.Dir, Name: e.Name} }

// IndexPath is the index of this user: $XDG_CONFIG_HOME/gompi/snapshots/index
// when XDG_CONFIG_HOME is set, else ~/.gompi/snapshots/index (beside the
// user's mca-params.conf).
func IndexPath() (string, error) {
	if x := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "gompi", "snapshots", "index"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("sstore: the snapshot index: %w", err)
	}
	return filepath.Join(home, ".gompi", "snapshots", "index"), nil
}

// ReadIndex reads the index at path: none when it does not exist. An index
// (or its folder) another user owns or that group or others may write is
// refused (CheckSafe's rule), and so is one that is not a regular file,
// larger than 1 MiB, or that does not parse.
func ReadIndex(path string) ([]IndexEntry, error) {
	for _, p := range []string{filepath.Dir(path), path} {
		if _, err := checkOwn(p, "where your references are looked for"); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		} else if err != nil {
			return nil, fmt.Errorf("sstore: the snapshot index: %w", err)
		}
	}
	f, err := OpenFile(path)
	if err != nil {
		return nil, fmt.Errorf("sstore: the snapshot index: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("sstore: the snapshot index: %w", err)
	} else if fi.Size() > maxIndexSize {
		return nil, fmt.Errorf("sstore: %w: %s: larger than 1 MiB (%d bytes)", ErrCorrupt, path, fi.Size())
	}
	return ParseIndex(io.LimitReader(f, maxIndexSize+1), path)
}

// ParseIndex reads index lines from r (where names it in errors): at most
// 1 MiB, lines of at most 4 KiB, 4096 entries; each a bare reference name,
// a remote location, and settings of IndexParams, each at most once. A
// name listed twice keeps its last line. Errors wrap ErrCorrupt and name
// the line.
func ParseIndex(r io.Reader, where string) ([]IndexEntry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), maxIndexLine)
	var out []IndexEntry
	at := map[string]int{}
	size := 0
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if size += len(line) + 1; size > maxIndexSize {
			return nil, fmt.Errorf("sstore: %w: %s: larger than 1 MiB", ErrCorrupt, where)
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e, err := parseIndexLine(line, fmt.Sprintf("%s:%d", where, n))
		if err != nil {
			return nil, err
		}
		if i, ok := at[e.Name]; ok {
			out[i] = e
			continue
		}
		if len(out) == maxIndexEntries {
			return nil, fmt.Errorf("sstore: %w: %s: more than %d references", ErrCorrupt, where, maxIndexEntries)
		}
		at[e.Name] = len(out)
		out = append(out, e)
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("sstore: %w: %s: a line longer than 4 KiB", ErrCorrupt, where)
	} else if err != nil {
		return nil, fmt.Errorf("sstore: %s: %w", where, err)
	}
	return out, nil
}

// parseIndexLine reads one entry; where is its file and line.
func parseIndexLine(line, where string) (IndexEntry, error) {
	fail := func(format string, a ...any) (IndexEntry, error) {
		return IndexEntry{}, fmt.Errorf("sstore: %w: %s: %s", ErrCorrupt, where, fmt.Sprintf(format, a...))
	}
	if !utf8.ValidString(line) || strings.ContainsFunc(line, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
		return fail("not UTF-8 text, or a control character")
	}
	fields := strings.Split(line, "\t")
	if len(fields) < 2 {
		return fail("want a reference name and its folder, separated by a tab")
	}
	e := IndexEntry{Name: fields[0], Dir: fields[1]}
	if !isBareName(e.Name) || e.Name != filepath.Clean(e.Name) || e.Name != strings.TrimSpace(e.Name) || strings.HasPrefix(e.Name, ".") {
		return fail("%q is not a reference name", e.Name)
	}
	if l, err := e.Ref().Location(); err != nil || l.Host == "" {
		return fail("%q is not a remote folder (sftp://[user@]host[:port]/dir)", e.Dir)
	}
	for _, kv := range fields[2:] {
		name, value, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return fail("%q: want name=value", kv)
		case !isIndexParam(name):
			return fail("%s: not a setting the index keeps (%s)", name, strings.Join(IndexParams, ", "))
		case e.setting(name) != nil:
			return fail("%s given twice", name)
		}
		e.Settings = append(e.Settings, mca.Setting{Name: name, Value: value, Origin: mca.Origin{Source: mca.SourceUserFile, Where: where}})
	}
	return e, nil
}

// sameDir reports whether two locations name the same folder, however
// written (sftp://h/d/ and h:/d are one).
func sameDir(a, b string) bool {
	la, erra := filem.ParseLocation(a)
	lb, errb := filem.ParseLocation(b)
	if erra != nil || errb != nil {
		return a == b
	}
	la.Path, lb.Path = pathpkg.Clean(la.Path), pathpkg.Clean(lb.Path)
	return la == lb
}

func isIndexParam(name string) bool {
	for _, p := range IndexParams {
		if p == name {
			return true
		}
	}
	return false
}

func (e IndexEntry) setting(name string) *mca.Setting {
	for i := range e.Settings {
		if e.Settings[i].Name == name {
			return &e.Settings[i]
		}
	}
	return nil
}

// LookupIndex is the entry of the index at path that names ref: name as
// given (a bare name), and dir too unless "" (any folder).
func LookupIndex(path, name, dir string) (IndexEntry, bool, error) {
	entries, err := ReadIndex(path)
	if err != nil {
		return IndexEntry{}, false, err
	}
	for _, e := range entries {
		if e.Name == name && (dir == "" || sameDir(e.Dir, dir)) {
			return e, true, nil
		}
	}
	return IndexEntry{}, false, nil
}

// RecordIndex adds e to the index at path, replacing the entry of the same
// name, under a lock (several jobs may checkpoint at once), written to a
// temporary file and renamed into place: 0600, in a folder made 0700. Only
// IndexParams of e are kept; a value that would not read back (a tab, a
// newline) is refused.
func RecordIndex(path string, e IndexEntry) error {
	e.Settings = keepIndexParams(e.Settings)
	if l, err := filem.ParseLocation(e.Dir); err == nil {
		l.Path = pathpkg.Clean(l.Path)
		e.Dir = l.String()
	}
	line := formatIndexLine(e)
	if _, err := parseIndexLine(line, "new entry"); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, OwnerDirMode); err != nil {
		return fmt.Errorf("sstore: the snapshot index: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, OwnerFileMode)
	if err != nil {
		return fmt.Errorf("sstore: the snapshot index: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("sstore: the snapshot index: lock: %w", err)
	}
	entries, err := ReadIndex(path) // refuses an unsafe one, as a reader would
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString(indexHeader + "\n")
	kept := 0
	for _, old := range entries {
		if old.Name != e.Name && kept < maxIndexEntries-1 {
			b.WriteString(formatIndexLine(old) + "\n")
			kept++
		}
	}
	b.WriteString(line + "\n")
	return WriteFileAtomic(path, b.Bytes(), OwnerFileMode)
}

func keepIndexParams(settings []mca.Setting) []mca.Setting {
	var out []mca.Setting
	for _, s := range settings {
		if isIndexParam(s.Name) && s.Value != "" {
			out = append(out, s)
		}
	}
	return out
}

func formatIndexLine(e IndexEntry) string {
	fields := []string{e.Name, e.Dir}
	for _, s := range e.Settings {
		fields = append(fields, s.Name+"="+s.Value)
	}
	return strings.Join(fields, "\t")
}

// Indexed is ms recording each remote reference it writes in the index at
// path: after the first WriteGlobal of a reference that succeeds, its name
// and folder with settings (IndexParams only). A failure to record is
// passed to warn, not returned: the checkpoint stands, only the index
// lacks it.
func Indexed(ms MetaStore, path string, settings []mca.Setting, warn func(error)) MetaStore {
	return &indexedMeta{MetaStore: ms, path: path, settings: keepIndexParams(settings), warn: warn, done: map[Ref]bool{}}
}

type indexedMeta struct {
	MetaStore
	path     string
	settings []mca.Setting
	warn     func(error)
	mu       sync.Mutex
	done     map[Ref]bool // references recorded
}

func (m *indexedMeta) WriteGlobal(ctx context.Context, ref Ref, g *GlobalMeta) error {
	if err := m.MetaStore.WriteGlobal(ctx, ref, g); err != nil {
		return err
	}
	if !ref.IsRemote() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done[ref] {
		return nil
	}
	m.done[ref] = true
	if err := RecordIndex(m.path, IndexEntry{Name: ref.Name, Dir: ref.Dir, Settings: m.settings}); err != nil {
		m.warn(fmt.Errorf("%s is not in your snapshot index (gompi-restart %s will not find it by name): %w", ref, ref.Name, err))
	}
	return nil
}
