// Package rsh is the FileM component that moves files with the ssh and
// scp commands, as Open MPI's filem/rsh did: whatever the user's ssh
// configuration reaches (keys, agents, jump hosts, known_hosts) works here.
// A file goes with scp, a directory tree as a tar stream through ssh (scp
// -r would follow symlinks). Both land under a temporary name next to the
// destination and are renamed into place by a command run over ssh, so a
// reader on the node never sees half a file.
//
// Transfers whose Remote has no Host are local copies, made the same way.
package rsh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"gompi/frameworks/filem"
	"gompi/frameworks/filem/fscopy"
	"gompi/mca"
)

// Component name and its parameters (Open MPI's names where it had them).
const (
	Name             = "rsh"
	prefix           = filem.Name + "_" + Name + "_"
	ParamRsh         = prefix + "rsh"
	ParamRcp         = prefix + "rcp"
	ParamArgs        = prefix + "args"
	ParamRcpArgs     = prefix + "rcp_args"
	ParamConcurrency = prefix + "max_concurrent"
	ParamMultiplex   = prefix + "multiplex"
)

// InstallHint says how to get the commands.
const InstallHint = "apt-get install -y openssh-client"

// New returns the rsh FileM component.
func New() mca.Component[filem.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: filem.Name, Name: Name,
		Description: "Moves files to and from other nodes with the ssh and scp commands",
		Version:     "1.0.0",
		Priority:    10,
		Params: []mca.ParamSpec{
			{Name: ParamRsh, Type: mca.String, Default: "ssh", Level: mca.LevelUser,
				Help: "Remote shell command (with fixed options of its own if any)"},
			{Name: ParamRcp, Type: mca.String, Default: "scp", Level: mca.LevelUser,
				Help: "Remote copy command for single files"},
			{Name: ParamArgs, Type: mca.String, Level: mca.LevelUser,
				Help: "ssh options for both commands, split on spaces, e.g. -p 2222 -i KEY -o UserKnownHostsFile=FILE (the same words as plm_ssh_args; scp gets -P for -p)"},
			{Name: ParamRcpArgs, Type: mca.String, Level: mca.LevelTuner,
				Help: "Further options for the copy command only, e.g. -l 800000 to limit its bandwidth"},
			{Name: ParamConcurrency, Type: mca.Int, Default: "10", Level: mca.LevelTuner,
				Help: "How many transfers of one batch run at the same time (Open MPI's filem_rsh_max_outgoing; at least 1)"},
			{Name: ParamMultiplex, Type: mca.Bool, Default: "true", Level: mca.LevelTuner,
				Help: "Share one ssh connection per node among the commands (ssh ControlMaster, kept 60 s after the last use), saving a login per command"},
		},
	}, query)
}

func query(ctx context.Context, q mca.Query) (filem.Module, int, error) {
	v := q.Values
	max := v.Int(ParamConcurrency)
	if max < 1 {
		return nil, 0, fmt.Errorf("filem/rsh: %s = %d: must be at least 1", ParamConcurrency, max)
	}
	rsh, rcp := strings.Fields(v.String(ParamRsh)), strings.Fields(v.String(ParamRcp))
	for _, c := range []struct {
		param string
		cmd   []string
	}{{ParamRsh, rsh}, {ParamRcp, rcp}} {
		if len(c.cmd) == 0 {
			return nil, 0, fmt.Errorf("filem/rsh: %s is empty; name a command (default %s)", c.param, map[string]string{ParamRsh: "ssh", ParamRcp: "scp"}[c.param])
		}
		if _, err := exec.LookPath(c.cmd[0]); err != nil {
			return nil, 0, fmt.Errorf("filem/rsh: %s = %s: %w (install it: %s): %w", c.param, c.cmd[0], err, InstallHint, mca.ErrSkip)
		}
	}
	sshArgs := strings.Fields(v.String(ParamArgs))
	scpArgs, err := scpOptions(sshArgs)
	if err != nil {
		return nil, 0, fmt.Errorf("filem/rsh: %s: %w", ParamArgs, err)
	}
	// Defaults after the user's options, which win (ssh keeps the first
	// value of an option): a dead node is noticed within a minute, and
	// commands to one node share a connection.
	common := []string{"-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3"}
	r := runner{rsh: rsh, rcp: rcp, prepare: func() error { return nil }}
	if v.Bool(ParamMultiplex) {
		dir := controlDir()
		common = append(common, "-o", "ControlMaster=auto", "-o", "ControlPath="+filepath.Join(dir, "%C"), "-o", "ControlPersist=60")
		// Made at the first remote command, not by merely selecting.
		r.prepare = sync.OnceValue(func() error {
			if err := makeControlDir(dir); err != nil {
				return fmt.Errorf("%s: %w; set %s=false to do without", ParamMultiplex, err, ParamMultiplex)
			}
			return nil
		})
	}
	r.sshArgs = append(sshArgs, common...)
	r.scpArgs = append(append(scpArgs, common...), strings.Fields(v.String(ParamRcpArgs))...)
	return &module{max: max, r: r}, q.Priority, nil
}

// controlDir is this user's directory for ssh control sockets.
func controlDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("gompi-filem-rsh-%d", os.Getuid()))
}

// makeControlDir creates dir, or checks that it is private to this user:
// a control socket lets whoever reaches it use the connection.
func makeControlDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is not a directory private to this user (uid %d, mode 0700); remove it", dir, os.Getuid())
	}
	return nil
}

type module struct {
	max int
	r   runner
}

func (m *module) Put(ctx context.Context, ts []filem.Transfer) error {
	return filem.Batch(ctx, m.max, len(ts), func(ctx context.Context, i int) error {
		t := ts[i]
		if err := m.put(ctx, t.Local, t.Remote, t.ParentMode()); err != nil {
			return &filem.TransferError{Op: "put", Src: t.Local, Dst: t.Remote.String(), Err: err}
		}
		return nil
	})
}

func (m *module) Get(ctx context.Context, ts []filem.Transfer) error {
	return filem.Batch(ctx, m.max, len(ts), func(ctx context.Context, i int) error {
		t := ts[i]
		if err := m.get(ctx, t.Remote, t.Local, t.ParentMode()); err != nil {
			return &filem.TransferError{Op: "get", Src: t.Remote.String(), Dst: t.Local, Err: err}
		}
		return nil
	})
}

func (m *module) Remove(ctx context.Context, rs []filem.Remote) error {
	return filem.Batch(ctx, m.max, len(rs), func(ctx context.Context, i int) error {
		r := rs[i]
		if err := m.remove(ctx, r); err != nil {
			return &filem.TransferError{Op: "remove", Src: r.String(), Err: err}
		}
		return nil
	})
}

// The commands run on the node, by sh, with paths as arguments ($1...)
// so nothing in a path is interpreted. One line each: the login shell
// may be csh.
const (
	statScript = `if [ -d "$1" ]; then echo d; elif [ -f "$1" ]; then echo f; elif [ -e "$1" ]; then echo o; else echo m; fi`
	// mkdirScript ($1 folder, $2 umask) creates the missing parents of a
	// destination with the transfer's ParentMode.
	mkdirScript   = `umask "$2" && mkdir -p -- "$1"`
	removeScript  = `rm -rf -- "$1"`
	getTreeScript = `cd -- "$1" && exec tar -c --hard-dereference -f - .`
	// replaceScript ($1 temporary, $2 destination) syncs the temporary
	// copy and renames it into place; where a directory is involved the
	// old destination is moved aside first and removed after.
	replaceScript = `t=$1; f=$2; d=$(dirname -- "$f"); ` +
		`if [ -d "$t" ]; then find "$t" -type f -exec sync -- {} + 2>/dev/null; else sync -- "$t" 2>/dev/null; fi; ` +
		`if [ -d "$t" ] || [ -d "$f" ]; then ` +
		`if [ -e "$f" ] || [ -L "$f" ]; then mv -f -- "$f" "$t.old" || exit 4; fi; ` +
		`if ! mv -f -- "$t" "$f"; then mv -f -- "$t.old" "$f"; exit 4; fi; rm -rf -- "$t.old"; ` +
		`else mv -f -- "$t" "$f" || exit 4; fi; sync -- "$d" 2>/dev/null; exit 0`
	// putTreeScript ($1 temporary, $2 destination, $3 umask) unpacks a
	// tar stream into the temporary directory, then replaces. tar -p
	// gives the tree its own modes whatever the umask.
	putTreeScript = `(umask "$3" && mkdir -p -- "$(dirname -- "$1")") && mkdir -- "$1" || exit 5; ` +
		`tar -x -p --no-same-owner -f - -C "$1" || { rm -rf -- "$1"; exit 6; }; ` + replaceScript
	// cleanupScript ($1 temporary, $2 destination) undoes a transfer
	// that stopped anywhere: an old destination moved aside and not
	// replaced goes back, temporaries go; then it reports the free space.
	cleanupScript = `t=$1; f=$2; ` +
		`if { [ -e "$t.old" ] || [ -L "$t.old" ]; } && ! { [ -e "$f" ] || [ -L "$f" ]; }; then mv -f -- "$t.old" "$f"; fi; ` +
		`rm -rf -- "$t" "$t.old"; df -P -k -- "$(dirname -- "$f")" 2>/dev/null | tail -n 1`
)

func (m *module) put(ctx context.Context, local string, r filem.Remote, dirMode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.Host == "" {
		return fscopy.Copy(ctx, fscopy.Local{}, local, fscopy.Local{}, r.Path, dirMode)
	}
	tg, err := parseTarget(r.Host)
	if err != nil {
		return err
	}
	if local == "" || r.Path == "" {
		return errors.New("empty path")
	}
	fi, err := os.Stat(local)
	if err != nil {
		return err
	}
	tmp := fscopy.TempName(r.Path)
	var res result
	switch {
	case fi.IsDir():
		pr, pw := io.Pipe()
		werr := make(chan error, 1)
		go func() {
			err := writeTar(ctx, pw, local)
			pw.CloseWithError(err)
			werr <- err
		}()
		res = m.r.ssh(ctx, tg, pr, nil, putTreeScript, tmp, r.Path, umask(dirMode))
		pr.Close() // ssh is gone: stop the writer if it still writes
		if err := <-werr; err != nil && !errors.Is(err, io.ErrClosedPipe) {
			m.cleanup(ctx, tg, tmp, r.Path)
			return err
		}
		if res.code != 0 {
			return m.failed(ctx, tg, "put "+local, res, true, tmp, r.Path)
		}
	case fi.Mode().IsRegular():
		if res = m.r.ssh(ctx, tg, nil, nil, mkdirScript, path.Dir(r.Path), umask(dirMode)); res.code != 0 {
			return m.r.failure(fmt.Sprintf("create %s on %s", path.Dir(r.Path), tg.name), tg, res, false)
		}
		if res = m.r.scp(ctx, tg, local, tg.scpPath(tmp)); res.code != 0 {
			return m.failed(ctx, tg, m.r.rcp[0]+" "+local, res, true, tmp, r.Path)
		}
		if res = m.r.ssh(ctx, tg, nil, nil, replaceScript, tmp, r.Path); res.code != 0 {
			return m.failed(ctx, tg, "rename into "+r.Path, res, true, tmp, r.Path)
		}
	default:
		return fmt.Errorf("%s is a %s, not a regular file or directory; only files and directories can be copied", local, fi.Mode().Type())
	}
	return nil
}

// umask is the umask under which mkdir creates folders of mode dirMode.
func umask(dirMode fs.FileMode) string {
	return fmt.Sprintf("%04o", 0o777&^dirMode.Perm())
}

// failed explains a failed step of a put and removes what it left on the
// node (over a new connection: the old one may be the problem).
func (m *module) failed(ctx context.Context, tg target, what string, res result, started bool, tmp, final string) error {
	err := m.r.failure(what, tg, res, started)
	freeKB, cerr := m.cleanup(ctx, tg, tmp, final)
	switch {
	case cerr != nil:
		return fmt.Errorf("%w; its temporary files on %s (%s) could not be removed (remove them by hand): %v", err, tg.name, tmp, cerr)
	case strings.Contains(res.stderr, "No space left") || freeKB >= 0 && freeKB < 1024 && !errors.Is(err, filem.ErrUnreachable):
		return fmt.Errorf("no space left on %s:%s (%d KiB free): %w: %w", tg.name, path.Dir(final), freeKB, syscall.ENOSPC, err)
	}
	return err
}

// cleanup runs cleanupScript; it returns the KiB free where final would
// be (-1 if unknown). It runs even when ctx is cancelled, for a minute.
func (m *module) cleanup(ctx context.Context, tg target, tmp, final string) (int64, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	res := m.r.ssh(cctx, tg, nil, nil, cleanupScript, tmp, final)
	if res.code != 0 {
		return -1, m.r.failure("clean up", tg, res, false)
	}
	f := strings.Fields(string(res.stdout))
	if len(f) >= 4 {
		if kb, err := strconv.ParseInt(f[3], 10, 64); err == nil {
			return kb, nil
		}
	}
	return -1, nil
}

func (m *module) get(ctx context.Context, r filem.Remote, local string, dirMode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.Host == "" {
		return fscopy.Copy(ctx, fscopy.Local{}, r.Path, fscopy.Local{}, local, dirMode)
	}
	tg, err := parseTarget(r.Host)
	if err != nil {
		return err
	}
	if local == "" || r.Path == "" {
		return errors.New("empty path")
	}
	res := m.r.ssh(ctx, tg, nil, nil, statScript, r.Path)
	if res.code != 0 {
		return m.r.failure("look at "+r.Path, tg, res, false)
	}
	kind := strings.TrimSpace(string(res.stdout))
	switch kind {
	case "m":
		return &fs.PathError{Op: "stat", Path: r.String(), Err: fs.ErrNotExist}
	case "d", "f":
	default:
		return fmt.Errorf("%s is not a regular file or directory; only files and directories can be copied", r)
	}
	dir := filepath.Dir(local)
	if err := fscopy.MkdirAll(fscopy.Local{}, dir, dirMode); err != nil {
		return fmt.Errorf("create parent directory: %w", err)
	}
	tmp := fscopy.TempName(local)
	if kind == "f" {
		err = m.getFile(ctx, tg, r.Path, tmp)
	} else {
		err = m.getTree(ctx, tg, r.Path, tmp)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = fscopy.Replace(fscopy.Local{}, tmp, local)
	}
	if err != nil {
		fscopy.Cleanup(fscopy.Local{}, tmp)
		return err
	}
	return fscopy.Local{}.SyncDir(dir)
}

func (m *module) getFile(ctx context.Context, tg target, remote, tmp string) error {
	if res := m.r.scp(ctx, tg, tg.scpPath(remote), tmp); res.code != 0 {
		return m.r.failure(m.r.rcp[0]+" "+tg.scpPath(remote), tg, res, true)
	}
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func (m *module) getTree(ctx context.Context, tg target, remote, tmp string) error {
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	xerr := make(chan error, 1)
	go func() {
		err := extractTar(ctx, pr, tmp)
		if err == nil {
			_, err = io.Copy(io.Discard, pr) // the archive's padding
		}
		pr.CloseWithError(fmt.Errorf("extraction stopped: %w", err))
		xerr <- err
	}()
	res := m.r.ssh(ctx, tg, nil, pw, getTreeScript, remote)
	pw.Close()
	if err := <-xerr; err != nil {
		if res.code != 0 && res.code != 141 && !strings.Contains(res.stderr, "Broken pipe") {
			return m.r.failure("tar "+remote, tg, res, true)
		}
		return err
	}
	if res.code != 0 {
		return m.r.failure("tar "+remote, tg, res, true)
	}
	return nil
}

func (m *module) remove(ctx context.Context, r filem.Remote) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.Host == "" {
		return fscopy.Remove(ctx, fscopy.Local{}, r.Path)
	}
	tg, err := parseTarget(r.Host)
	if err != nil {
		return err
	}
	if r.Path == "" {
		return errors.New("empty path")
	}
	if res := m.r.ssh(ctx, tg, nil, nil, removeScript, r.Path); res.code != 0 {
		return m.r.failure("rm -rf "+r.Path, tg, res, false)
	}
	return nil
}

var (
	_ filem.Module = (*module)(nil)
)
