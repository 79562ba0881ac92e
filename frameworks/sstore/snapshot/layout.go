package snapshot

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"gompi/frameworks/filem"
)

// Ref names a global snapshot: <Dir>/<Name>, e.g.
// /scratch/gompi_global_snapshot_4711.ckpt.
type Ref struct {
	Dir  string `json:"dir"`
	Name string `json:"name"`
}

// The snapshot reference layout (DESIGN.md):
//
//	<dir>/gompi_global_snapshot_<job>.ckpt/
//	  global_snapshot_meta
//	  <seq>/gompi_snapshot_<rank>.ckpt/
//	    snapshot_meta
//	    ...the CRS's files
const (
	GlobalMetaFile = "global_snapshot_meta"
	LocalMetaFile  = "snapshot_meta"
	refPrefix      = "gompi_global_snapshot_"
	refSuffix      = ".ckpt"
)

// RefName is the reference name of a job's global snapshot.
func RefName(job string) string { return refPrefix + job + refSuffix }

// LocalName is the directory name of a rank's local snapshot.
func LocalName(rank int) string { return fmt.Sprintf("gompi_snapshot_%d.ckpt", rank) }

// Path is the global snapshot directory.
func (r Ref) Path() string { return filepath.Join(r.Dir, r.Name) }

// MetaPath is the global metadata file.
func (r Ref) MetaPath() string { return filepath.Join(r.Path(), GlobalMetaFile) }

// SeqDir holds every local snapshot of one sequence.
func (r Ref) SeqDir(seq int) string { return filepath.Join(r.Path(), fmt.Sprint(seq)) }

// LocalPath is rank's local snapshot of seq on global storage.
func (r Ref) LocalPath(seq, rank int) string { return filepath.Join(r.SeqDir(seq), LocalName(rank)) }

// String is the reference as ParseRef reads it back: its path on this
// node, or its remote location (sftp://user@host:port/dir/name).
func (r Ref) String() string {
	l, err := r.Location()
	if err != nil || l.Host == "" {
		return r.Path()
	}
	l.Path = path.Join(l.Path, r.Name)
	return l.String()
}

// ParseRef reads what a user names a snapshot with: a bare reference name
// (found in defaultDir, the global snapshot directory parameter), a path
// to the reference directory, absolute or relative, or a remote location
// of it (host:/dir/name, sftp://[user@]host[:port]/dir/name). A trailing
// slash is fine; . and .. are paths. It does not check that the reference
// exists (FindRef does, for a bare name).
func ParseRef(arg, defaultDir string) (Ref, error) {
	arg = strings.TrimSpace(arg)
	if arg == "" {
		return Ref{}, fmt.Errorf("sstore: empty snapshot reference; give the name printed as \"Snapshot Ref.\" or its path")
	}
	if l, err := filem.ParseLocation(arg); err == nil && l.Host != "" {
		p := strings.TrimRight(l.Path, "/")
		name := path.Base(p)
		if p == "" || name == "." || name == "/" || name == "~" {
			return Ref{}, fmt.Errorf("sstore: snapshot reference %q names no reference folder; give .../gompi_global_snapshot_<job>.ckpt", arg)
		}
		l.Path = path.Dir(p)
		return Ref{Dir: l.String(), Name: name}, nil
	}
	clean := filepath.Clean(arg)
	if !strings.ContainsRune(arg, filepath.Separator) && clean != "." && clean != ".." {
		if defaultDir == "" {
			return Ref{}, fmt.Errorf("sstore: snapshot reference %q is a bare name but no global snapshot directory is set (snapc_base_global_snapshot_dir); give its path", arg)
		}
		return Ref{Dir: defaultDir, Name: clean}, nil
	}
	abs, err := filepath.Abs(clean)
	if err != nil {
		return Ref{}, fmt.Errorf("sstore: snapshot reference %q: %w", arg, err)
	}
	return Ref{Dir: filepath.Dir(abs), Name: filepath.Base(abs)}, nil
}

// FindRef is ParseRef for a reference a user names to a tool, with a bare
// name looked up: in the current folder first (where gompi-checkpoint's
// user often stands), then in defaultDir (the global snapshot directory
// parameter) when it is on this node, then in the user's snapshot index
// (IndexPath: the remote references checkpoints wrote). When a bare name
// is in none, the error names each place (wrapping fs.ErrNotExist). A
// remote defaultDir is not looked into here: when the index does not name
// the reference, its reference in defaultDir is returned, and reading its
// metadata says whether it is there. Names that are not bare are
// ParseRef's, unchecked.
func FindRef(arg, defaultDir string) (Ref, error) {
	name := filepath.Clean(strings.TrimSpace(arg))
	if !isBareName(arg) {
		return ParseRef(arg, defaultDir)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return Ref{}, fmt.Errorf("sstore: snapshot reference %q: current folder: %w", arg, err)
	}
	if isDir(filepath.Join(cwd, name)) {
		return Ref{Dir: cwd, Name: name}, nil
	}
	looked := fmt.Sprintf("the current folder (%s)", cwd)
	ref := Ref{Dir: defaultDir, Name: name}
	l, err := ref.Location()
	remote := err == nil && l.Host != ""
	if defaultDir != "" && !remote {
		ref.Dir = l.Path
		if isDir(ref.Path()) {
			return ref, nil
		}
		looked += fmt.Sprintf(", then in snapc_base_global_snapshot_dir (%s)", ref.Dir)
	}
	if index, err := IndexPath(); err == nil {
		e, ok, err := LookupIndex(index, name, "")
		if err != nil {
			return Ref{}, err
		}
		if ok {
			return e.Ref(), nil
		}
		looked += fmt.Sprintf(", then in your snapshot index (%s)", index)
	}
	switch {
	case remote:
		return ref, nil
	case defaultDir == "":
		return Ref{}, fmt.Errorf("sstore: no snapshot reference %s: looked in %s, and no global snapshot directory is set (snapc_base_global_snapshot_dir): give its path: %w",
			name, looked, fs.ErrNotExist)
	}
	return Ref{}, fmt.Errorf("sstore: no snapshot reference %s: looked in %s; give the reference's path: %w",
		ref.Path(), looked, fs.ErrNotExist)
}

// isBareName reports whether arg names a reference without a folder: no
// separator, no remote host, and not . or .. (which are folders).
func isBareName(arg string) bool {
	arg = strings.TrimSpace(arg)
	if arg == "" || arg == "." || arg == ".." || strings.ContainsRune(arg, filepath.Separator) {
		return false
	}
	l, err := filem.ParseLocation(arg)
	return err != nil || l.Host == ""
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// Location reads Dir as a FileM location: a folder on this node, or a
// remote one (host:/dir, sftp://[user@]host[:port]/dir).
func (r Ref) Location() (filem.Location, error) { return filem.ParseLocation(r.Dir) }

// IsRemote reports whether the reference lives on another host, so that
// only FileM reaches it.
func (r Ref) IsRemote() bool {
	l, err := r.Location()
	return err == nil && l.Host != ""
}

// Global returns where rel (slash-separated, inside the reference; empty
// for the reference itself) lives on global storage, as FileM addresses it.
func (r Ref) Global(rel ...string) (filem.Remote, error) {
	l, err := r.Location()
	if err != nil {
		return filem.Remote{}, fmt.Errorf("sstore: reference %s: %w", r.Name, err)
	}
	if l.Host == "" {
		return filem.Remote{Path: filepath.Join(append([]string{l.Path, r.Name}, rel...)...)}, nil
	}
	l.Path = path.Join(append([]string{l.Path, r.Name}, rel...)...)
	return l.Remote(), nil
}

// GlobalLocal is rank's local snapshot of seq on global storage, as FileM
// addresses it.
func (r Ref) GlobalLocal(seq, rank int) (filem.Remote, error) {
	return r.Global(fmt.Sprint(seq), LocalName(rank))
}
