// Package sftp is the FileM component that moves files to and from other
// nodes over SFTP (pkg/sftp on golang.org/x/crypto/ssh) against the
// nodes' own OpenSSH servers. Host keys are checked against a known_hosts
// file and users authenticate with keys (files or an ssh-agent). One ssh
// connection per user@host:port carries a few SFTP sessions, each file is
// written with many requests in flight, and every destination is built
// under a temporary name and renamed into place.
//
// Transfers whose Remote has no Host are local copies, made the same way.
package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	psftp "github.com/pkg/sftp"

	"gompi/frameworks/filem"
	"gompi/frameworks/filem/fscopy"
	"gompi/mca"
)

// Component name and its parameters.
const (
	Name = "sftp"

	prefix            = filem.Name + "_" + Name + "_"
	ParamIdentity     = prefix + "identity"
	ParamKnownHosts   = prefix + "known_hosts"
	ParamUser         = prefix + "user"
	ParamPort         = prefix + "port"
	ParamConcurrency  = prefix + "max_concurrent"
	ParamSessions     = prefix + "sessions"
	ParamMaxPacket    = prefix + "max_packet"
	ParamRequests     = prefix + "requests"
	ParamConnTimeout  = prefix + "connect_timeout"
	ParamKeepalive    = prefix + "keepalive"
	ParamIdleTimeout  = prefix + "idle_timeout"
	defaultIdentities = "~/.ssh/id_ed25519,~/.ssh/id_ecdsa,~/.ssh/id_rsa"
)

// New returns the sftp FileM component.
func New() mca.Component[filem.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: filem.Name, Name: Name,
		Description: "Moves files to and from other nodes over SFTP (OpenSSH servers, key authentication, known_hosts checking)",
		Version:     "1.0.0",
		// Below raw: where nodes share a file system a local copy is
		// cheaper; select filem=sftp where they do not.
		Priority: 15,
		Params: []mca.ParamSpec{
			{Name: ParamIdentity, Type: mca.List, Level: mca.LevelUser,
				Help: "Private key files to log in with (comma-separated); empty: the first of " + defaultIdentities + " that exist. Keys of a running ssh-agent (SSH_AUTH_SOCK) are offered too"},
			{Name: ParamKnownHosts, Type: mca.String, Level: mca.LevelUser,
				Help: "known_hosts file holding the nodes' host keys; empty: ~/.ssh/known_hosts. An unknown or changed host key is refused"},
			{Name: ParamUser, Type: mca.String, Level: mca.LevelUser,
				Help: "User to log in as when a location names none; empty: the local user"},
			{Name: ParamPort, Type: mca.Int, Default: "22", Level: mca.LevelUser,
				Help: "ssh port when a location names none"},
			{Name: ParamConcurrency, Type: mca.Int, Default: "8", Level: mca.LevelTuner,
				Help: "How many transfers of one batch run at the same time (at least 1)"},
			{Name: ParamSessions, Type: mca.Int, Default: "2", Level: mca.LevelTuner,
				Help: "SFTP sessions (server processes) per ssh connection that concurrent transfers spread over (1-10)"},
			{Name: ParamMaxPacket, Type: mca.Size, Default: "32KiB", Level: mca.LevelTuner,
				Help: "Payload of one SFTP read or write request; above 32 KiB only OpenSSH-compatible servers are sure to accept it (at most 255 KiB)"},
			{Name: ParamRequests, Type: mca.Int, Default: "64", Level: mca.LevelTuner,
				Help: "SFTP requests in flight per file (at least 1)"},
			{Name: ParamConnTimeout, Type: mca.Duration, Default: "30s", Level: mca.LevelTuner,
				Help: "Time to connect and log in to a node"},
			{Name: ParamKeepalive, Type: mca.Duration, Default: "15s", Level: mca.LevelTuner,
				Help: "Interval of keepalive probes; a node that answers none within one interval is taken as lost (0 = no probes)"},
			{Name: ParamIdleTimeout, Type: mca.Duration, Default: "60s", Level: mca.LevelTuner,
				Help: "An ssh connection unused this long is closed"},
		},
	}, query)
}

// config is what a module runs with.
type config struct {
	identities  []string
	knownHosts  string
	user        string
	port        int
	max         int
	sessions    int
	maxPacket   int
	requests    int
	connTimeout time.Duration
	keepalive   time.Duration
	idle        time.Duration
}

func query(ctx context.Context, q mca.Query) (filem.Module, int, error) {
	v := q.Values
	c := config{
		identities:  v.List(ParamIdentity),
		knownHosts:  v.String(ParamKnownHosts),
		user:        v.String(ParamUser),
		port:        v.Int(ParamPort),
		max:         v.Int(ParamConcurrency),
		sessions:    v.Int(ParamSessions),
		maxPacket:   int(v.Size(ParamMaxPacket)),
		requests:    v.Int(ParamRequests),
		connTimeout: v.Duration(ParamConnTimeout),
		keepalive:   v.Duration(ParamKeepalive),
		idle:        v.Duration(ParamIdleTimeout),
	}
	explicit := len(c.identities) > 0
	if !explicit {
		c.identities = strings.Split(defaultIdentities, ",")
	}
	var errs []error
	check := func(bad bool, name string, val any, want string) {
		if bad {
			errs = append(errs, fmt.Errorf("filem/sftp: %s = %v: %s", name, val, want))
		}
	}
	check(c.port < 1 || c.port > 65535, ParamPort, c.port, "must be a port number (1-65535)")
	check(c.max < 1, ParamConcurrency, c.max, "must be at least 1")
	check(c.sessions < 1 || c.sessions > 10, ParamSessions, c.sessions, "must be 1 to 10 (OpenSSH allows 10 sessions per connection)")
	check(c.maxPacket < 1<<10 || c.maxPacket > maxPacketLimit, ParamMaxPacket, c.maxPacket, fmt.Sprintf("must be 1 KiB to %d bytes", maxPacketLimit))
	check(c.requests < 1, ParamRequests, c.requests, "must be at least 1")
	check(c.connTimeout <= 0, ParamConnTimeout, c.connTimeout, "must be positive")
	check(c.keepalive < 0, ParamKeepalive, c.keepalive, "must not be negative")
	check(c.idle <= 0, ParamIdleTimeout, c.idle, "must be positive")
	if c.user != "" {
		if _, _, _, err := filem.ParseHost(c.user + "@x"); err != nil {
			errs = append(errs, fmt.Errorf("filem/sftp: %s = %q: not a user name", ParamUser, c.user))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	home, _ := os.UserHomeDir()
	for i, id := range c.identities {
		c.identities[i] = expandHome(id, home)
	}
	if c.knownHosts == "" {
		c.knownHosts = filepath.Join(home, ".ssh", "known_hosts")
	}
	c.knownHosts = expandHome(c.knownHosts, home)
	if c.user == "" {
		c.user = localUser()
	}
	if explicit {
		// Named keys must exist; the defaults are tried as they exist.
		for _, id := range c.identities {
			if _, err := os.Stat(id); err != nil {
				return nil, 0, fmt.Errorf("filem/sftp: %s names %s: %w", ParamIdentity, id, err)
			}
		}
	}
	m := &module{cfg: c, pool: newPool(c, q.Logger)}
	return m, q.Priority, nil
}

// maxPacketLimit keeps a write request within OpenSSH's 256 KiB message
// limit, headers included.
const maxPacketLimit = 255 << 10

func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

func localUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

type module struct {
	cfg  config
	pool *pool
}

func (m *module) Put(ctx context.Context, ts []filem.Transfer) error {
	return filem.Batch(ctx, m.cfg.max, len(ts), func(ctx context.Context, i int) error {
		t := ts[i]
		err := m.on(ctx, t.Remote.Host, func(remote fscopy.FS) error {
			return fscopy.Copy(ctx, fscopy.Local{}, t.Local, remote, t.Remote.Path, t.ParentMode())
		})
		if err != nil {
			return &filem.TransferError{Op: "put", Src: t.Local, Dst: t.Remote.String(), Err: err}
		}
		return nil
	})
}

func (m *module) Get(ctx context.Context, ts []filem.Transfer) error {
	return filem.Batch(ctx, m.cfg.max, len(ts), func(ctx context.Context, i int) error {
		t := ts[i]
		err := m.on(ctx, t.Remote.Host, func(remote fscopy.FS) error {
			return fscopy.Copy(ctx, remote, t.Remote.Path, fscopy.Local{}, t.Local, t.ParentMode())
		})
		if err != nil {
			return &filem.TransferError{Op: "get", Src: t.Remote.String(), Dst: t.Local, Err: err}
		}
		return nil
	})
}

func (m *module) Remove(ctx context.Context, rs []filem.Remote) error {
	return filem.Batch(ctx, m.cfg.max, len(rs), func(ctx context.Context, i int) error {
		r := rs[i]
		err := m.on(ctx, r.Host, func(remote fscopy.FS) error {
			return fscopy.Remove(ctx, remote, r.Path)
		})
		if err != nil {
			return &filem.TransferError{Op: "remove", Src: r.String(), Err: err}
		}
		return nil
	})
}

// Close closes every connection the module holds. A module is still
// usable afterwards; it connects again as needed.
func (m *module) Close() error {
	m.pool.closeAll()
	return nil
}

// on runs fn against the file system of host ("" = this node). When the
// connection is lost under fn, the error wraps filem.ErrUnreachable and
// the temporary files fn made are removed over a new connection, if the
// host takes one.
func (m *module) on(ctx context.Context, host string, fn func(fscopy.FS) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if host == "" {
		return fn(fscopy.Local{})
	}
	s, err := m.pool.get(ctx, host)
	if err != nil {
		return err
	}
	rfs := &remoteFS{s: s}
	err = fn(rfs)
	lost := err != nil && s.conn.lost(err)
	if lost {
		// The error can tell before the connection's watcher does: drop
		// it now, or the cleanup below and the next call get it again.
		m.pool.drop(s.conn)
	}
	m.pool.release(s)
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ENOSPC) || !lost {
		return err
	}
	err = fmt.Errorf("filem/sftp: connection to %s lost during the transfer (node down, sshd killed or network cut): %w: %w", s.conn.key, err, filem.ErrUnreachable)
	if temps := rfs.temporaries(); len(temps) > 0 {
		if cerr := m.cleanup(ctx, host, temps); cerr != nil {
			err = fmt.Errorf("%w; its temporary files %s could not be removed (remove them by hand): %v", err, strings.Join(temps, ", "), cerr)
		}
	}
	return err
}

// cleanup removes temporary names over a fresh connection, after the one
// that made them was lost.
func (m *module) cleanup(ctx context.Context, host string, temps []string) error {
	s, err := m.pool.get(ctx, host)
	if err != nil {
		return err
	}
	defer m.pool.release(s)
	return fscopy.Recover(&remoteFS{s: s}, temps)
}

// remoteFS is a node's file system through one SFTP session. It records
// the temporary names it creates, so they can be removed after a lost
// connection.
type remoteFS struct {
	s     *session
	temps []string
}

func (r *remoteFS) c() *psftp.Client { return r.s.client }

func (r *remoteFS) fail(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: r.s.conn.key + ":" + name, Err: err}
}

func (r *remoteFS) note(name string) {
	if fscopy.IsTemp(name) {
		r.temps = append(r.temps, name)
	}
}

func (r *remoteFS) temporaries() []string { return r.temps }

func (r *remoteFS) Lstat(name string) (fs.FileInfo, error) {
	fi, err := r.c().Lstat(name)
	return fi, r.fail("lstat", name, err)
}

func (r *remoteFS) ReadDir(name string) ([]fs.FileInfo, error) {
	ents, err := r.c().ReadDir(name)
	return ents, r.fail("readdir", name, err)
}

func (r *remoteFS) Readlink(name string) (string, error) {
	t, err := r.c().ReadLink(name)
	return t, r.fail("readlink", name, err)
}

func (r *remoteFS) Open(name string) (io.ReadCloser, error) {
	f, err := r.c().Open(name)
	if err != nil {
		return nil, r.fail("open", name, err)
	}
	return f, nil
}

func (r *remoteFS) CreateFile(ctx context.Context, name string, perm fs.FileMode, src io.Reader) error {
	r.note(name)
	f, err := r.c().OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return r.fail("create", name, err)
	}
	// ReadFromWithConcurrency keeps up to the client's request limit of
	// writes in flight, whatever src is.
	_, err = f.ReadFromWithConcurrency(fscopy.Reader{Ctx: ctx, R: src}, 0)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && r.s.conn.fsync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil && ctx.Err() == nil && !r.s.conn.lost(err) {
		err = r.explain(name, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return r.fail("write", name, err)
}

// explain turns the bare "Failure" SFTP gives for a full disk into
// ENOSPC, by asking the server how much room is left.
func (r *remoteFS) explain(name string, err error) error {
	var st *psftp.StatusError
	if !errors.As(err, &st) || !r.s.conn.statvfs {
		return err
	}
	vfs, verr := r.c().StatVFS(pathDir(name))
	if verr != nil {
		return err
	}
	if free := vfs.FreeSpace(); free < 1<<20 || vfs.Favail == 0 {
		return fmt.Errorf("no space left on the device (%d bytes free): %w (%v)", free, syscall.ENOSPC, err)
	}
	return err
}

func pathDir(name string) string {
	if i := strings.LastIndexByte(name, '/'); i > 0 {
		return name[:i]
	} else if i == 0 {
		return "/"
	}
	return "."
}

func (r *remoteFS) Mkdir(name string) error {
	r.note(name)
	if err := r.c().Mkdir(name); err != nil {
		return r.fail("mkdir", name, err)
	}
	return r.fail("chmod", name, r.c().Chmod(name, 0o700))
}

func (r *remoteFS) Symlink(target, name string) error {
	return r.fail("symlink", name, r.c().Symlink(target, name))
}

func (r *remoteFS) Chmod(name string, mode fs.FileMode) error {
	return r.fail("chmod", name, r.c().Chmod(name, mode))
}

func (r *remoteFS) Rename(oldname, newname string) error {
	r.note(newname)
	if r.s.conn.posixRename {
		return r.fail("rename", oldname, r.c().PosixRename(oldname, newname))
	}
	return r.fail("rename", oldname, r.c().Rename(oldname, newname))
}

func (r *remoteFS) RemoveAll(name string) error {
	err := r.c().RemoveAll(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return r.fail("remove", name, err)
}

func (r *remoteFS) String() string { return r.s.conn.key }

// lostErr reports whether err says the connection under an SFTP call is gone.
func lostErr(err error) bool {
	return errors.Is(err, psftp.ErrSSHFxConnectionLost) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF)
}

var (
	_ filem.Module = (*module)(nil)
	_ io.Closer    = (*module)(nil)
	_ fscopy.FS    = (*remoteFS)(nil)
)
