// Package filem is the File Management framework: moving files and
// directory trees across node boundaries. It is the only framework that
// moves snapshot bytes between machines; others hand it paths.
//
// Components: raw (nodes share a file system: local copies), rsh (ssh and
// scp commands) and sftp (pkg/sftp against an OpenSSH server). Every
// component writes a destination through a temporary name and renames it
// into place, so a reader never sees half a file and a failed move leaves
// the destination as it was.
package filem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
)

// Name of the framework, and of its selection parameter.
const Name = "filem"

// Remote is a path on a node. An empty Host means this node.
type Remote struct {
	Host string `json:"host,omitempty"`
	Path string `json:"path"`
}

func (r Remote) String() string {
	if r.Host == "" {
		return r.Path
	}
	return r.Host + ":" + r.Path
}

// Transfer pairs a local path with a remote one. For Put the local file or
// directory is the source, for Get the destination.
type Transfer struct {
	Local  string `json:"local"`
	Remote Remote `json:"remote"`
	// DirMode is the mode of the parent folders the transfer creates on
	// the destination's side (those that exist keep theirs); 0 means
	// 0700. A FileM mostly moves snapshots, which hold a job's program,
	// arguments and exported variables: it makes nothing others can read
	// unless asked (sstore_base_group_readable asks for 0750).
	DirMode fs.FileMode `json:"dir_mode,omitempty"`
}

// DefaultDirMode is the mode of the parent folders a transfer creates
// when it names none.
const DefaultDirMode fs.FileMode = 0o700

// ParentMode is the mode of the parent folders t creates.
func (t Transfer) ParentMode() fs.FileMode {
	if t.DirMode == 0 {
		return DefaultDirMode
	}
	return t.DirMode.Perm()
}

// Module is a selected FileM. Each call handles a batch; a component may run
// the transfers of a batch concurrently. A directory is moved with all it
// holds. Missing parent directories of a destination are created, with
// the transfer's ParentMode.
type Module interface {
	// Put copies each Local to its Remote.
	Put(ctx context.Context, ts []Transfer) error
	// Get copies each Remote to its Local.
	Get(ctx context.Context, ts []Transfer) error
	// Remove deletes each path (a directory with all it holds). Removing
	// what does not exist is no error.
	Remove(ctx context.Context, paths []Remote) error
}

// ErrUnreachable is wrapped when a host cannot be reached at all.
var ErrUnreachable = errors.New("host unreachable")

// TransferError says which transfer of a batch failed. A batch error is an
// errors.Join of these; a missing source wraps fs.ErrNotExist.
type TransferError struct {
	Op  string // "put", "get", "remove"
	Src string
	Dst string
	Err error
}

func (e *TransferError) Error() string {
	if e.Dst == "" {
		return fmt.Sprintf("%s %s: %v", e.Op, e.Src, e.Err)
	}
	return fmt.Sprintf("%s %s -> %s: %v", e.Op, e.Src, e.Dst, e.Err)
}

func (e *TransferError) Unwrap() error { return e.Err }
