package crscriu

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	criu "github.com/checkpoint-restore/go-criu/v8"
	"golang.org/x/sys/unix"

	"gompi/frameworks/crs"
	"gompi/frameworks/sstore/snapshot"
)

// Regular files a dumped tree has open for writing. CRIU records such a
// file by path, offset and size, and refuses a restore where its size
// changed ("File ... has bad size"); a rank checkpointed and left running
// goes on writing it. So the dump saves each one's content as it is while
// CRIU holds the tree frozen (CRIU's post-dump notification comes before
// it lets the tree go on, stop or die) into the snapshot folder as
// gompi-file-N: a file of the rank's local snapshot like the images, with
// its size and CRC-32C in the metadata, stored and moved like them. Meta
// records its path (criu_file_N) and permissions (criu_filemode_N). A
// restore writes each back to its path, replacing what is there (or
// creating it, with those permissions, when it is gone), before CRIU runs.
//
// What cannot be saved so is refused before CRIU is asked, naming the
// process, descriptor and file: a file open for writing that is neither a
// regular file nor a character device (a FIFO or a socket by path, a block
// device), or a regular file of a kernel file system (/proc, /sys), whose
// content is not data. A character device (a terminal, /dev/null) is
// CRIU's to dump or refuse; so is a deleted file, which CRIU keeps in its
// images when small and refuses itself when not.

const (
	metaFilePrefix = "criu_file_"     // criu_file_N: the path of saved file N
	metaModePrefix = "criu_filemode_" // criu_filemode_N: its permissions, octal
	savedPrefix    = "gompi-file-"    // gompi-file-N: its content, in the snapshot
)

// writable reports whether pid holds descriptor fd open for writing (its
// fdinfo's flags).
func writable(pid, fd int) (bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, fd))
	if err != nil {
		return false, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			if err != nil {
				return false, fmt.Errorf("descriptor %d of pid %d: flags %q: %w", fd, pid, v, err)
			}
			return flags&unix.O_ACCMODE != unix.O_RDONLY, nil
		}
	}
	return false, fmt.Errorf("descriptor %d of pid %d: no flags in its fdinfo", fd, pid)
}

// toSave says whether target, descriptor fd of pid, is a file the dump
// saves: a regular file open for writing. It refuses one open for writing
// that cannot be saved.
func toSave(pid, fd int, target string) (bool, error) {
	if !strings.HasPrefix(target, "/") || strings.HasSuffix(target, " (deleted)") {
		return false, nil // a pipe, an anonymous inode; a deleted file is CRIU's
	}
	w, err := writable(pid, fd)
	if errors.Is(err, fs.ErrNotExist) || !w {
		return false, nil // closed meanwhile, or open read-only
	}
	if err != nil {
		return false, err
	}
	// Through the descriptor: the file pid holds, whatever the path is now.
	fi, err := os.Stat(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	why := ""
	switch mode := fi.Mode(); {
	case mode.IsRegular() && (under(target, "/proc") || under(target, "/sys")):
		why = "a kernel file, whose content is not data"
	case mode.IsRegular():
		return true, nil
	case mode&fs.ModeCharDevice != 0:
		return false, nil
	default:
		why = "not a regular file (" + mode.Type().String() + ")"
	}
	return false, fmt.Errorf("%w: pid %d (%s) has %s open for writing as descriptor %d, which crs=criu cannot save with the snapshot: %s",
		crs.ErrNotCheckpointable, pid, command(pid), target, fd, why)
}

// under reports whether path is dir or below it.
func under(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// fileSaver saves the files a tree has open for writing when CRIU has
// dumped it and still holds it frozen.
type fileSaver struct {
	criu.NoNotify
	dir   string   // the snapshot folder
	paths []string // the files, each once
	meta  map[string]string
}

// PostDump saves every file; an error makes CRIU fail the dump (and let
// the tree go on as it was).
func (s *fileSaver) PostDump() error {
	for i, p := range s.paths {
		mode, err := saveFile(p, filepath.Join(s.dir, savedPrefix+strconv.Itoa(i)))
		if err != nil {
			return fmt.Errorf("save %s, open for writing in the dumped tree: %w", p, err)
		}
		s.meta[metaFilePrefix+strconv.Itoa(i)] = p
		s.meta[metaModePrefix+strconv.Itoa(i)] = strconv.FormatUint(uint64(mode.Perm()), 8)
	}
	return nil
}

// saveFile copies path to dst (owner-only: it may hold anything) and
// returns path's mode.
func saveFile(path, dst string) (fs.FileMode, error) {
	src, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return 0, err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, snapshot.OwnerFileMode)
	if err != nil {
		return 0, err
	}
	// The size now, the tree frozen, is the size CRIU recorded.
	if _, err := io.CopyN(out, src, fi.Size()); err != nil {
		out.Close()
		return 0, err
	}
	return fi.Mode(), out.Close()
}

// savedFiles lists the files Meta records as saved, by number.
func savedFiles(meta map[string]string) []int {
	var ns []int
	for k := range meta {
		if s, ok := strings.CutPrefix(k, metaFilePrefix); ok {
			if n, err := strconv.Atoi(s); err == nil && n >= 0 {
				ns = append(ns, n)
			}
		}
	}
	sort.Ints(ns)
	return ns
}

// putBack writes every file the dump saved in dir back to its path, as
// it was at the dump.
func putBack(dir string, meta map[string]string) error {
	for _, n := range savedFiles(meta) {
		path := meta[metaFilePrefix+strconv.Itoa(n)]
		mode, err := strconv.ParseUint(meta[metaModePrefix+strconv.Itoa(n)], 8, 32)
		if err != nil {
			return fmt.Errorf("put back %s: its mode %q in the metadata: %w", path, meta[metaModePrefix+strconv.Itoa(n)], err)
		}
		if err := putFile(filepath.Join(dir, savedPrefix+strconv.Itoa(n)), path, fs.FileMode(mode)); err != nil {
			return fmt.Errorf("put back %s, which the dumped tree had open for writing: %w", path, err)
		}
	}
	return nil
}

// putFile makes path hold saved's content: rewritten in place (the
// restored process reopens it by path), created with mode when gone.
func putFile(saved, path string, mode fs.FileMode) error {
	src, err := os.Open(saved)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, mode)
	if err != nil {
		return err
	}
	n, err := io.Copy(dst, src)
	if err == nil {
		err = dst.Truncate(n)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}
