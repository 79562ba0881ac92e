// Package crscriu is the transparent CRS: it saves and restores a rank's
// whole process tree from outside it, through CRIU's RPC (criu swrk, with
// github.com/checkpoint-restore/go-criu), so a program needs no C/R code
// at all. It runs where the ranks' daemon runs (gompid, or a plugin child
// of gompid: gompi-plugin-criu), never in the rank it saves: provisioned
// with a rank's host it refuses with crs.ErrNotCheckpointable.
//
// Checkpoint(req) dumps the tree rooted at req.PID into req.Dir: the
// root is expected to be the init of its own PID namespace and its
// session's leader (gompid starts each rank so under a small gompi init;
// a restore then never collides with a running PID). Options: none leaves
// the tree running (CRIU's leave-running, checkpoint-and-continue), Term
// lets CRIU kill it once dumped, Stop leaves it stopped (CRIU's
// leave-stopped; SIGCONT resumes it). Before CRIU is asked, the tree is
// checked in /proc: a socket anywhere in it is refused
// (crs.ErrNotCheckpointable naming the process, descriptor and socket); a
// dump CRIU refuses is too, with the last lines of CRIU's log. Meta records
// which of the root's descriptors were pipes (criu_fd_N = "pipe:[inode]"),
// which Restore replaces with the pipes it is given; the image files are
// the snapshot's files, in name order, each owner-only (0600: they hold
// the processes' whole memory). Regular files the tree has open for
// writing are saved with them as they are at the dump (gompi-file-N, its
// path and permissions in Meta) and put back before a restore, since
// CRIU refuses to restore a file whose size changed; a file open for
// writing that cannot be saved so (not a regular file, or one of /proc or
// /sys) is refused naming it (files.go). CRIU's logs go to a temporary folder,
// never into the snapshot.
//
// Restore (crs.Restorer) first writes the files the dump saved back to
// their paths, then restores the images in req.Dir in CRIU's
// restore-sibling mode: the restored root is a child of the process
// running the module, which waits on it (Process.Wait). The request's
// Stdin, Stdout, Stderr and Files take the place of the root's
// descriptors 0, 1, 2 and 3 on that were pipes (CRIU's inherit-fd, keyed
// by the pipe's inode recorded in Meta); a descriptor the request covers
// that was a pipe and is given nil is refused, since the restored process
// would use a pipe nobody holds the other end of. A pipe beyond the
// descriptors the request covers (one the rank inherited from elsewhere)
// is restored by CRIU with no other end, with a warning. Restart refuses:
// there is no program to relaunch (crs.ErrNoSnapshot when Dir holds no
// CRIU images).
//
// The component is offered only where CRIU works (Query): the process is
// root, a CRIU binary is found (crs_criu_binary, else criu on PATH, else
// the project-local one scripts/install-criu.sh installs, .local/criu
// beside the installation or in the source tree), it is 4.2 or newer and
// `criu check` passes; otherwise gompi-info shows it skipped with the
// reason, and when it is offered, the CRIU it uses ("CRIU 4.2.1 at
// PATH", mca.Query.Note). Each binary's probe is cached for the process's
// life.
package crscriu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	criu "github.com/checkpoint-restore/go-criu/v8"
	"github.com/checkpoint-restore/go-criu/v8/rpc"

	"gompi/frameworks/crs"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// Name of the component.
const Name = "criu"

// Priority is the component's default priority: below self (20). It
// rarely decides: -am ft-enable-cr gives a program linking package cr
// self and any other program criu where it can be used (boot's
// outsideForProgram), and a rank never considers criu unless named.
const Priority = 10

// ParamBinary names the CRIU binary to use; empty searches for one.
const ParamBinary = "crs_criu_binary"

// inventory is the image every CRIU dump writes first and a restore
// reads first: a folder without it holds no CRIU snapshot.
const inventory = "inventory.img"

// New returns the criu CRS component.
func New() mca.Component[crs.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: crs.Name, Name: Name,
		Description: "Transparent checkpoint: the node's daemon dumps and restores a rank's process tree with CRIU (4.2 or newer, run as root)",
		Version:     "1.0.0",
		Priority:    Priority,
		Params: []mca.ParamSpec{{Name: ParamBinary, Type: mca.String, Level: mca.LevelUser,
			Help: "Path of the criu binary; empty = criu on PATH, else the project-local one scripts/install-criu.sh installs (.local/criu beside the installation or in the source tree). It must be 4.2 or newer and pass `criu check`"}},
	}, query)
}

// query offers the component where CRIU works and checkpoint/restart is
// on (or crs names it). A rank (and gompirun choosing the job's CRS as a
// rank would) considers it only when crs names it: a rank never runs it,
// and every rank of a C/R job would otherwise pay for a `criu check`.
// gompirun asks as itself when the program has no C/R code of its own.
func query(ctx context.Context, q mca.Query) (crs.Module, int, error) {
	if err := q.SkipUnlessCR(crs.Name, Name); err != nil {
		return nil, 0, err
	}
	if q.Role == mca.RoleApp && !mca.Names(q.Values, crs.Name, Name) {
		return nil, 0, fmt.Errorf("%s/%s: not named (--mca %s %s): a rank is dumped by its daemon, never runs crs=criu itself: %w", crs.Name, Name, crs.Name, Name, mca.ErrSkip)
	}
	b, err := available(ctx, os.Geteuid(), q.Values.String(ParamBinary))
	if err != nil {
		return nil, 0, fmt.Errorf("%s/%s: %w: %w", crs.Name, Name, err, mca.ErrSkip)
	}
	if q.Note != nil {
		q.Note(b.String())
	}
	return NewModule(b.Path, b.Text), q.Priority, nil
}

// available returns the CRIU to use, or why there is none.
func available(ctx context.Context, euid int, explicit string) (binary, error) {
	if euid != 0 {
		return binary{}, fmt.Errorf("not root (uid %d): CRIU must run as root to dump and restore other processes", euid)
	}
	return find(ctx, explicit)
}

// Module dumps and restores process trees with one CRIU binary.
type Module struct {
	path, version string

	mu  sync.Mutex
	log *slog.Logger
}

// NewModule returns a module using the CRIU at path (version as it
// prints it, for Meta and messages), unprobed: Query probes.
func NewModule(path, version string) *Module {
	return &Module{path: path, version: version, log: slog.New(slog.DiscardHandler)}
}

// Provision accepts a daemon's host: criu saves ranks from outside.
func (m *Module) Provision(_ context.Context, h crs.Host) error {
	if h.Daemon == nil {
		return fmt.Errorf("crs/criu: provision: %w: crs=criu dumps a rank from outside, in the node's daemon; this host is not one", crs.ErrNotCheckpointable)
	}
	if h.Log != nil {
		m.mu.Lock()
		m.log = h.Log
		m.mu.Unlock()
	}
	return nil
}

// Close ends the provisioning; CRIU keeps nothing open between calls.
func (m *Module) Close() error { return nil }

func (m *Module) logger() *slog.Logger {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.log
}

// Checkpoint dumps the process tree rooted at req.PID into req.Dir.
func (m *Module) Checkpoint(ctx context.Context, req crs.CheckpointRequest) (crs.CheckpointResult, error) {
	fail := func(err error) (crs.CheckpointResult, error) {
		return crs.CheckpointResult{}, fmt.Errorf("crs/criu: checkpoint pid %d: %w", req.PID, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := crs.Alive(req.PID); err != nil {
		return fail(err)
	}
	meta, n, saved, err := inspect(req.PID)
	if err != nil {
		return fail(err)
	}
	meta[metaVersion] = m.version
	unlock, err := hostLock(ctx)
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	var nfy criu.Notify
	if len(saved) > 0 {
		nfy = &fileSaver{dir: req.Dir, paths: saved, meta: meta}
	}
	err = m.dump(ctx, req, nfy)
	unlock()
	if err != nil {
		return fail(err)
	}
	files, err := imageFiles(req.Dir)
	if err != nil {
		return fail(err)
	}
	m.logger().Debug("crs/criu: dumped", "pid", req.PID, "processes", n, "files", len(files), "saved files", saved, "took", time.Since(start))
	res := crs.CheckpointResult{State: crs.StateContinue, Files: files, Meta: meta}
	if req.Options.Term {
		res.State = crs.StateTerm
	}
	return res, nil
}

// dump runs CRIU's dump, with nfy (when not nil) told once the tree is
// dumped and still frozen. A dump that fails leaves req.Dir as it found
// it (empty): what CRIU and nfy wrote there is removed.
func (m *Module) dump(ctx context.Context, req crs.CheckpointRequest, nfy criu.Notify) (err error) {
	images, err := os.Open(req.Dir)
	if err != nil {
		return fmt.Errorf("open the snapshot folder: %w", err)
	}
	defer images.Close()
	work, cleanup, err := workDir("dump")
	if err != nil {
		return err
	}
	defer cleanup()
	opts := &rpc.CriuOpts{
		ImagesDirFd: ptr(int32(images.Fd())),
		WorkDirFd:   ptr(int32(work.Fd())),
		LogFile:     ptr("dump.log"),
		Pid:         ptr(int32(req.PID)),
		ShellJob:    ptr(true),
		Timeout:     timeout(ctx),
	}
	switch {
	case req.Options.Stop:
		opts.LeaveStopped = ptr(true)
	case !req.Options.Term:
		opts.LeaveRunning = ptr(true)
	}
	c := criu.MakeCriu()
	c.SetCriuPath(m.path)
	derr := c.Dump(opts, nfy)
	if derr != nil && logTail(work.Name(), "dump.log") == "" && crs.Alive(req.PID) == nil && ctx.Err() == nil {
		// CRIU's service failed before it opened its log, so before it
		// touched the tree (seen once in CI at load 15: "err:56", swrk
		// exit status 1, no log): a second service is asked once.
		m.logger().Warn("crs/criu: CRIU failed before it began the dump; asking once more", "pid", req.PID, "err", derr)
		clearDir(req.Dir)
		derr = c.Dump(opts, nfy)
	}
	if derr != nil {
		clearDir(req.Dir)
		if aerr := crs.Alive(req.PID); aerr != nil {
			return fmt.Errorf("%w (CRIU: %w)", aerr, derr)
		}
		return fmt.Errorf("%w: CRIU's dump failed: %w%s", crs.ErrNotCheckpointable, derr, logTail(work.Name(), "dump.log"))
	}
	// Done, even if ctx ended meanwhile: with Term the tree is gone and
	// these images are all that is left of it.
	return nil
}

// Restart refuses: criu brings the process back itself (Restore).
func (m *Module) Restart(ctx context.Context, req crs.RestartRequest) (crs.Launch, error) {
	if err := ctx.Err(); err != nil {
		return crs.Launch{}, fmt.Errorf("crs/criu: restart from %s: %w", req.Dir, err)
	}
	if err := hasImages(req.Dir); err != nil {
		return crs.Launch{}, fmt.Errorf("crs/criu: restart from %s: %w", req.Dir, err)
	}
	return crs.Launch{}, fmt.Errorf("crs/criu: restart from %s: %w: crs=criu restores the process image itself (crs.Restorer's Restore); there is no program to relaunch", req.Dir, errors.ErrUnsupported)
}

// hasImages returns an error wrapping crs.ErrNoSnapshot when dir holds no
// CRIU dump.
func hasImages(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, inventory)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: no CRIU images (%s) there", crs.ErrNoSnapshot, inventory)
		}
		return err
	}
	return nil
}

// imageFiles lists what CRIU wrote in dir, in name order, and makes each
// its owner's alone (snapshot.OwnerFileMode, whatever the umask or the
// folder's group access): the images hold the processes' whole memory.
func imageFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list the images: %w", err)
	}
	var files []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("CRIU left %s in the snapshot folder, which is not a regular file", e.Name())
		}
		if err := os.Chmod(filepath.Join(dir, e.Name()), snapshot.OwnerFileMode); err != nil {
			return nil, fmt.Errorf("make the image %s owner-only: %w", e.Name(), err)
		}
		files = append(files, e.Name())
	}
	if !slices.Contains(files, inventory) {
		return nil, fmt.Errorf("CRIU's dump wrote no %s", inventory)
	}
	return files, nil
}

// workDir makes a private temporary folder for CRIU's log and scratch
// files, open for WorkDirFd; cleanup closes and removes it.
func workDir(what string) (*os.File, func(), error) {
	name, err := os.MkdirTemp("", "gompi-criu-"+what+"-")
	if err != nil {
		return nil, nil, fmt.Errorf("CRIU work folder: %w", err)
	}
	f, err := os.Open(name)
	if err != nil {
		os.RemoveAll(name)
		return nil, nil, fmt.Errorf("CRIU work folder: %w", err)
	}
	return f, func() { f.Close(); os.RemoveAll(name) }, nil
}

// clearDir removes everything in dir (a failed dump's partial images).
func clearDir(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// logTail is the last lines of a CRIU log, for an error message.
func logTail(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	return "; its log ends" + tail(b, 5)
}

// timeout is CRIU's own timeout (seconds, for freezing the tree) from
// ctx's deadline: a dump (or restore), once CRIU has it, cannot be
// called off (go-criu gives no way to stop its criu swrk); it takes a
// fraction of a second for a rank.
func timeout(ctx context.Context) *uint32 {
	d, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	s := time.Until(d) / time.Second
	if s < 1 {
		s = 1
	}
	return ptr(uint32(s))
}

func ptr[T any](v T) *T { return &v }

var (
	_ crs.Module                = (*Module)(nil)
	_ crs.Restorer              = (*Module)(nil)
	_ mca.Provisioner[crs.Host] = (*Module)(nil)
	_ io.Closer                 = (*Module)(nil)
)
