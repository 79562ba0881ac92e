package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// A reference holds a job's program, arguments, parameters and exports,
// and gompi-restart runs what its metadata names: it is its owner's alone.
// Its folders are 0700 and its files 0600; with sstore_base_group_readable
// the reference folder is created 0750, and what is written into it takes
// the group's read access from the folder it goes into (DirMode,
// FileMode), so the one choice made when the reference is created holds
// for everything in it.
const (
	OwnerDirMode  fs.FileMode = 0o700
	OwnerFileMode fs.FileMode = 0o600
	GroupDirMode  fs.FileMode = 0o750
	GroupFileMode fs.FileMode = 0o640
)

// Modes are the folder and file modes of a reference created with or
// without the group's read access (sstore_base_group_readable), for
// writers that cannot look at the folder they write into (a remote one).
func Modes(groupRead bool) (dir, file fs.FileMode) {
	if groupRead {
		return GroupDirMode, GroupFileMode
	}
	return OwnerDirMode, OwnerFileMode
}

// DirMode is the mode of a folder created inside parent: group-readable
// only when parent is.
func DirMode(parent string) fs.FileMode {
	if groupReadable(parent) {
		return GroupDirMode
	}
	return OwnerDirMode
}

// FileMode is the mode of a file written into dir: group-readable only
// when dir is.
func FileMode(dir string) fs.FileMode {
	if groupReadable(dir) {
		return GroupFileMode
	}
	return OwnerFileMode
}

func groupReadable(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.Mode().Perm()&0o050 == 0o050
}

// MkdirRef creates ref's folder on this node if it does not exist: 0700,
// or 0750 when groupRead (sstore_base_group_readable). An existing folder
// keeps its mode: its owner chose it.
func MkdirRef(ref Ref, groupRead bool) error {
	mode, _ := Modes(groupRead)
	if err := os.MkdirAll(ref.Dir, OwnerDirMode); err != nil {
		return fmt.Errorf("sstore: create the global snapshot folder %s: %w", ref.Dir, err)
	}
	if err := os.Mkdir(ref.Path(), mode); errors.Is(err, fs.ErrExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("sstore: create the snapshot reference %s: %w", ref.Path(), err)
	}
	// Mkdir's mode passes through the umask; the reference's is exact.
	if err := os.Chmod(ref.Path(), mode); err != nil {
		return fmt.Errorf("sstore: create the snapshot reference %s: %w", ref.Path(), err)
	}
	return nil
}

// ErrUnsafeRef is wrapped when a reference could have been written by
// someone other than its user: restarting it would run what they chose.
var ErrUnsafeRef = errors.New("unsafe snapshot reference")

// CheckSafe checks, as ssh's StrictModes does, that ref's folder and each
// of paths (its metadata, the folders of the sequence about to be
// restarted) is owned by this user (or by root) and writable by no one
// else; a path that does not exist is passed over. A path another user
// owns or that group or others may write is an error wrapping
// ErrUnsafeRef that names it and the fix; paths that group or others may
// read give one warning.
func CheckSafe(ref Ref, paths ...string) (warning string, err error) {
	var errs []error
	readable := 0
	for _, p := range append([]string{ref.Path()}, paths...) {
		canRead, err := checkOwn(p, "what restart runs")
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // what is missing, verification reports
		case errors.Is(err, ErrUnsafeRef):
			errs = append(errs, err)
		case err != nil:
			return "", fmt.Errorf("sstore: %w", err)
		case canRead != "":
			if readable == 0 {
				warning = canRead
			}
			readable++
		}
	}
	if readable > 1 {
		warning += fmt.Sprintf(", and %d more of the reference's folders and files", readable-1)
	}
	if readable > 0 {
		warning += fmt.Sprintf(": they hold the job's program, arguments and exports; chmod -R go-rwx %s keeps them yours", ref.Path())
	}
	if len(errs) > 0 {
		return warning, fmt.Errorf("sstore: %w", errors.Join(errs...))
	}
	return warning, nil
}

// checkOwn is CheckSafe's check of one path: an error wrapping
// ErrUnsafeRef when another user owns it or group or others may write it
// (naming it and the fix), the Lstat error when it cannot be read, and
// when group or others may read it, a sentence saying so. what is what
// someone else could then have written.
func checkOwn(p, what string) (readable string, err error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return "", err
	}
	uid := os.Getuid()
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
		return "", fmt.Errorf("%w: %s: its owner cannot be read", ErrUnsafeRef, p)
	case int(st.Uid) != uid && st.Uid != 0:
		return "", fmt.Errorf("%w: %s is owned by user %d, not by you (%d): another user could have written %s; copy it if you trust it", ErrUnsafeRef, p, st.Uid, uid, what)
	case fi.Mode().Perm()&0o022 != 0:
		return "", fmt.Errorf("%w: %s is writable by %s (mode %04o): someone else could have written %s; if it is yours and unchanged, run chmod go-w %s", ErrUnsafeRef, p, whoMay(fi.Mode(), 0o020, 0o002), fi.Mode().Perm(), what, p)
	case fi.Mode().Perm()&0o044 != 0:
		return fmt.Sprintf("%s is readable by %s (mode %04o)", p, whoMay(fi.Mode(), 0o040, 0o004), fi.Mode().Perm()), nil
	}
	return "", nil
}

// whoMay names who the group and other bits of mode give an access.
func whoMay(mode fs.FileMode, group, other fs.FileMode) string {
	switch {
	case mode&group != 0 && mode&other != 0:
		return "its group and others"
	case mode&group != 0:
		return "its group"
	}
	return "others"
}
