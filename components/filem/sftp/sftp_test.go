package sftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"gompi/frameworks"
	"gompi/frameworks/filem"
	"gompi/frameworks/filem/filemtest"
	"gompi/frameworks/filem/fscopy"
	"gompi/mca"
)

// newModule selects the component with settings; the module's connections
// are closed when the test ends.
func newModule(t testing.TB, settings ...mca.Setting) *module {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	set.FileM.Register(New())
	vals, err := params.ResolveSettings(settings)
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.FileM.SelectOne(t.Context(), vals, mca.RoleDaemon, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Priority != 15 {
		t.Errorf("priority %d, want 15", c.Priority)
	}
	m := c.Module.(*module)
	t.Cleanup(func() { m.Close() })
	return m
}

// to is the settings that reach s with its user key and known_hosts.
func to(s *filemtest.SSHD, more ...mca.Setting) []mca.Setting {
	return append([]mca.Setting{
		{Name: ParamIdentity, Value: s.UserKey},
		{Name: ParamKnownHosts, Value: s.KnownHosts},
	}, more...)
}

func TestConformanceLocal(t *testing.T) {
	filemtest.Run(t, func(t *testing.T) filem.Module { return newModule(t) })
}

func TestConformance(t *testing.T) {
	s := filemtest.StartSSHD(t)
	for _, tc := range []struct {
		name     string
		settings []mca.Setting
	}{
		{"defaults", nil},
		{"one-session-one-at-a-time-small-packets", []mca.Setting{
			{Name: ParamSessions, Value: "1"}, {Name: ParamConcurrency, Value: "1"},
			{Name: ParamMaxPacket, Value: "4KiB"}, {Name: ParamRequests, Value: "1"}}},
		{"large-packets", []mca.Setting{{Name: ParamMaxPacket, Value: "255KiB"}, {Name: ParamSessions, Value: "4"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newModule(t, to(s, tc.settings...)...)
			filemtest.Run(t, func(t *testing.T) filem.Module { return filemtest.OnHost(m, s.Host()) })
			m.pool.mu.Lock()
			defer m.pool.mu.Unlock()
			if len(m.pool.conns) != 1 {
				t.Errorf("%d connections after the kit, want 1 (pooled)", len(m.pool.conns))
			}
			for _, c := range m.pool.conns {
				if len(c.sessions) > m.cfg.sessions {
					t.Errorf("%d sessions, at most %d allowed", len(c.sessions), m.cfg.sessions)
				}
				if !c.posixRename || !c.fsync {
					t.Errorf("OpenSSH's posix-rename and fsync extensions not used")
				}
			}
		})
	}
}

func TestHostKeys(t *testing.T) {
	s := filemtest.StartSSHD(t)
	dir := t.TempDir()
	stranger, err := os.ReadFile(s.StrangerKey() + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	entry := fmt.Sprintf("[127.0.0.1]:%d", s.Port)
	for _, tc := range []struct {
		name, known string
		want        []string
	}{
		{"unknown", "", []string{"not in", "refusing to connect to an unknown host", "ssh-keyscan -p " + fmt.Sprint(s.Port) + " 127.0.0.1 >>"}},
		{"other-host-known", "[127.0.0.1]:1 " + s.HostKey + "\n", []string{"not in"}},
		{"changed", entry + " " + strings.Join(strings.Fields(string(stranger))[:2], " ") + "\n", []string{"HAS CHANGED", "ssh-keygen -R '" + entry + "'"}},
		{"revoked", "@revoked * " + s.HostKey + "\n" + entry + " " + s.HostKey + "\n", []string{"revoked"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			known := filepath.Join(dir, tc.name)
			if err := os.WriteFile(known, []byte(tc.known), 0o600); err != nil {
				t.Fatal(err)
			}
			m := newModule(t, mca.Setting{Name: ParamIdentity, Value: s.UserKey}, mca.Setting{Name: ParamKnownHosts, Value: known})
			err := m.Remove(t.Context(), []filem.Remote{{Host: s.Host(), Path: filepath.Join(dir, "x")}})
			if err == nil {
				t.Fatal("connected to a host whose key is not known")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if errors.Is(err, filem.ErrUnreachable) {
				t.Errorf("a host key problem is not an unreachable host: %v", err)
			}
		})
	}
	t.Run("no-known-hosts-file", func(t *testing.T) {
		m := newModule(t, mca.Setting{Name: ParamIdentity, Value: s.UserKey}, mca.Setting{Name: ParamKnownHosts, Value: filepath.Join(dir, "none")})
		err := m.Remove(t.Context(), []filem.Remote{{Host: s.Host(), Path: "/nonexistent"}})
		if err == nil || !strings.Contains(err.Error(), "ssh-keyscan") || !strings.Contains(err.Error(), ParamKnownHosts) {
			t.Errorf("%v: want advice to fill the known hosts file", err)
		}
	})
}

func TestAuthentication(t *testing.T) {
	s := filemtest.StartSSHD(t)
	m := newModule(t, mca.Setting{Name: ParamIdentity, Value: s.StrangerKey()}, mca.Setting{Name: ParamKnownHosts, Value: s.KnownHosts})
	err := m.Remove(t.Context(), []filem.Remote{{Host: s.Host(), Path: "/nonexistent"}})
	if err == nil || !strings.Contains(err.Error(), "refused the login of root") || !strings.Contains(err.Error(), s.StrangerKey()) {
		t.Errorf("login with a key the node does not accept: %v", err)
	}
	if errors.Is(err, filem.ErrUnreachable) {
		t.Errorf("a refused key is not an unreachable host: %v", err)
	}

	// A named key must exist.
	if err := queryErr(t, mca.Setting{Name: ParamIdentity, Value: filepath.Join(t.TempDir(), "nokey")}); err == nil || !strings.Contains(err.Error(), "nokey") {
		t.Errorf("a missing identity file: %v", err)
	}

	// A passphrase-protected key without an agent is explained.
	t.Setenv("SSH_AUTH_SOCK", "")
	locked := filepath.Join(t.TempDir(), "locked")
	b, _ := os.ReadFile(s.UserKey)
	if err := os.WriteFile(locked, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd("ssh-keygen", "-q", "-p", "-P", "", "-N", "secret", "-f", locked); err != nil {
		t.Fatalf("ssh-keygen -p: %v: %s", err, out)
	}
	m = newModule(t, to(s, mca.Setting{Name: ParamIdentity, Value: locked})...)
	err = m.Remove(t.Context(), []filem.Remote{{Host: s.Host(), Path: "/nonexistent"}})
	if err == nil || !strings.Contains(err.Error(), "passphrase") || !strings.Contains(err.Error(), "ssh-add "+locked) {
		t.Errorf("a passphrase-protected key: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	s := filemtest.StartSSHD(t)
	port := s.Port
	s.Stop()
	m := newModule(t, to(s)...)
	for _, host := range []string{fmt.Sprintf("root@127.0.0.1:%d", port), "no-such-node.invalid"} {
		err := m.Remove(t.Context(), []filem.Remote{{Host: host, Path: "/x"}})
		if !errors.Is(err, filem.ErrUnreachable) || !strings.Contains(err.Error(), "cannot reach") {
			t.Errorf("%s: %v, want filem.ErrUnreachable", host, err)
		}
	}
}

// bigFile writes a file of n bytes that does not compress (ssh could
// otherwise shrink it on the wire).
func bigFile(t testing.TB, path string, n int) {
	t.Helper()
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		x := uint64(i)*0x9e3779b97f4a7c15 ^ uint64(i>>7)
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(x >> (8 * j))
		}
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// noTemps fails if dir holds a temporary name.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if fscopy.IsTemp(e.Name()) {
			t.Errorf("temporary file %s left in %s", e.Name(), dir)
		}
	}
}

func TestConnectionDropped(t *testing.T) {
	s := filemtest.StartSSHD(t)
	m := newModule(t, to(s)...)
	local, remote := t.TempDir(), t.TempDir()
	src := filepath.Join(local, "big")
	bigFile(t, src, 256<<20)
	dst := filepath.Join(remote, "big")
	if err := os.WriteFile(dst, []byte("the previous checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	killed := make(chan int, 1)
	go func() {
		_, err := filemtest.WaitWrite(t.Context(), remote, fscopy.TempMarker, 1<<20)
		if err != nil {
			t.Error(err)
		}
		killed <- s.KillSessions()
	}()
	err := m.Put(t.Context(), []filem.Transfer{{Local: src, Remote: filem.Remote{Host: s.Host(), Path: dst}}})
	if n := <-killed; n == 0 {
		t.Fatal("no session was killed")
	}
	if !errors.Is(err, filem.ErrUnreachable) || !strings.Contains(err.Error(), "lost during the transfer") {
		t.Fatalf("put while the session was killed: %v, want a lost connection wrapping ErrUnreachable", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "the previous checkpoint" {
		t.Errorf("the earlier destination was damaged: %d bytes", len(b))
	}
	noTemps(t, remote)
	// The pool connects again.
	if err := m.Put(t.Context(), []filem.Transfer{{Local: src, Remote: filem.Remote{Host: s.Host(), Path: dst}}}); err != nil {
		t.Fatalf("put after the connection was lost: %v", err)
	}
	same(t, src, dst)

	// Get: the node dies while a file comes back.
	back := filepath.Join(local, "back")
	go func() {
		if _, err := filemtest.WaitWrite(t.Context(), local, fscopy.TempMarker, 1<<20); err != nil {
			t.Error(err)
		}
		s.Stop()
		killed <- 1
	}()
	err = m.Get(t.Context(), []filem.Transfer{{Local: back, Remote: filem.Remote{Host: s.Host(), Path: dst}}})
	<-killed
	if !errors.Is(err, filem.ErrUnreachable) {
		t.Fatalf("get while the server was killed: %v, want ErrUnreachable", err)
	}
	noTemps(t, local)
	if _, err := os.Stat(back); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a partial get left %s (%v)", back, err)
	}
	s.Restart(t)
	if err := m.Get(t.Context(), []filem.Transfer{{Local: back, Remote: filem.Remote{Host: s.Host(), Path: dst}}}); err != nil {
		t.Fatalf("get after the server came back: %v", err)
	}
	same(t, src, back)
}

// The server dies for good during a put: the error says so and that the
// temporary file could not be removed.
func TestServerGone(t *testing.T) {
	s := filemtest.StartSSHD(t)
	m := newModule(t, to(s)...)
	local, remote := t.TempDir(), t.TempDir()
	src := filepath.Join(local, "big")
	bigFile(t, src, 256<<20)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := filemtest.WaitWrite(t.Context(), remote, fscopy.TempMarker, 1<<20); err != nil {
			t.Error(err)
		}
		s.Stop()
	}()
	err := m.Put(t.Context(), []filem.Transfer{{Local: src, Remote: filem.Remote{Host: s.Host(), Path: filepath.Join(remote, "big")}}})
	<-done
	if !errors.Is(err, filem.ErrUnreachable) || !strings.Contains(err.Error(), "could not be removed") {
		t.Fatalf("put while the server died: %v", err)
	}
}

func TestDiskFull(t *testing.T) {
	s := filemtest.StartSSHD(t)
	disk := filemtest.Tmpfs(t, 1<<20)
	m := newModule(t, to(s)...)
	src := filepath.Join(t.TempDir(), "state")
	bigFile(t, src, 4<<20)
	dst := filepath.Join(disk, "state")
	if err := os.WriteFile(dst, []byte("the previous checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := m.Put(t.Context(), []filem.Transfer{{Local: src, Remote: filem.Remote{Host: s.Host(), Path: dst}}})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("put onto a full disk: %v, want ENOSPC", err)
	}
	if errors.Is(err, filem.ErrUnreachable) {
		t.Errorf("a full disk is not an unreachable host: %v", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "the previous checkpoint" {
		t.Errorf("the earlier destination was damaged: %d bytes", len(b))
	}
	noTemps(t, disk)
}

func TestBroadcastGather(t *testing.T) {
	s := filemtest.StartSSHD(t)
	m := newModule(t, to(s)...)
	root := t.TempDir()
	src := filepath.Join(root, "snap")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	bigFile(t, filepath.Join(src, "state"), 3<<20)
	var nodes []filem.Remote
	for i := range 5 {
		nodes = append(nodes, filem.Remote{Host: s.Host(), Path: filepath.Join(root, fmt.Sprint("node", i), "snap")})
	}
	if err := filem.Broadcast(t.Context(), m, src, nodes); err != nil {
		t.Fatal(err)
	}
	var from []filem.Remote
	for i, n := range nodes {
		same(t, filepath.Join(src, "state"), filepath.Join(n.Path, "state"))
		p := filepath.Join(filepath.Dir(n.Path), fmt.Sprintf("gompi_snapshot_%d.ckpt", i))
		if err := os.Rename(n.Path, p); err != nil {
			t.Fatal(err)
		}
		from = append(from, filem.Remote{Host: s.Host(), Path: p})
	}
	out := filepath.Join(root, "gathered")
	if err := filem.Gather(t.Context(), m, from, out); err != nil {
		t.Fatal(err)
	}
	for i := range nodes {
		same(t, filepath.Join(src, "state"), filepath.Join(out, fmt.Sprintf("gompi_snapshot_%d.ckpt", i), "state"))
	}
	if err := m.Remove(t.Context(), from); err != nil {
		t.Fatal(err)
	}
	for _, f := range from {
		if _, err := os.Stat(f.Path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not removed", f.Path)
		}
	}
}

func TestIdleConnectionClosed(t *testing.T) {
	s := filemtest.StartSSHD(t)
	m := newModule(t, to(s, mca.Setting{Name: ParamIdleTimeout, Value: "1ms"})...)
	if err := m.Remove(t.Context(), []filem.Remote{{Host: s.Host(), Path: "/nonexistent"}}); err != nil {
		t.Fatal(err)
	}
	m.pool.mu.Lock()
	var c *conn
	for _, c = range m.pool.conns {
	}
	m.pool.mu.Unlock()
	if c == nil {
		t.Fatal("no connection pooled") // it cannot have gone yet: watch removes it only after done
	}
	<-c.done // closed by the idle timer
}

func TestBadParams(t *testing.T) {
	for _, p := range []mca.Setting{
		{Name: ParamConcurrency, Value: "0"}, {Name: ParamSessions, Value: "11"}, {Name: ParamPort, Value: "0"},
		{Name: ParamMaxPacket, Value: "1MiB"}, {Name: ParamRequests, Value: "0"}, {Name: ParamIdleTimeout, Value: "0"},
		{Name: ParamUser, Value: "a@b"},
	} {
		if err := queryErr(t, p); err == nil || !strings.Contains(err.Error(), p.Name) {
			t.Errorf("%s = %s: %v, want an error naming the parameter", p.Name, p.Value, err)
		}
	}
}

// queryErr is the component's answer to a query with settings.
func queryErr(t *testing.T, settings ...mca.Setting) error {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	set.FileM.Register(New())
	vals, err := params.ResolveSettings(settings)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := New().Query(t.Context(), mca.Query{Values: vals, Role: mca.RoleDaemon, Priority: 15})
	if err == nil {
		m.(*module).Close()
	}
	return err
}

func same(t *testing.T, a, b string) {
	t.Helper()
	x, err1 := os.ReadFile(a)
	y, err2 := os.ReadFile(b)
	if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
		t.Errorf("%s and %s differ (%v, %v)", a, b, err1, err2)
	}
}

func runCmd(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}

// BenchmarkPut measures MB/s of one 256 MiB file to 127.0.0.1, and per
// processor of this machine (client, server and sshd's encryption share
// them).
func BenchmarkPut(b *testing.B) {
	s := filemtest.StartSSHD(b)
	src := filepath.Join(b.TempDir(), "big")
	bigFile(b, src, 256<<20)
	dst := filepath.Join(b.TempDir(), "big")
	for _, packet := range []string{"32KiB", "64KiB", "128KiB", "255KiB"} {
		b.Run("put/packet="+packet, func(b *testing.B) {
			m := newModule(b, to(s, mca.Setting{Name: ParamMaxPacket, Value: packet})...)
			xfer(b, 256<<20, func() error {
				return m.Put(b.Context(), []filem.Transfer{{Local: src, Remote: filem.Remote{Host: s.Host(), Path: dst}}})
			})
		})
		b.Run("get/packet="+packet, func(b *testing.B) {
			m := newModule(b, to(s, mca.Setting{Name: ParamMaxPacket, Value: packet})...)
			back := filepath.Join(b.TempDir(), "back")
			if err := m.Put(b.Context(), []filem.Transfer{{Local: src, Remote: filem.Remote{Host: s.Host(), Path: dst}}}); err != nil {
				b.Fatal(err)
			}
			xfer(b, 256<<20, func() error {
				return m.Get(b.Context(), []filem.Transfer{{Local: back, Remote: filem.Remote{Host: s.Host(), Path: dst}}})
			})
		})
	}
	b.Run("local", func(b *testing.B) {
		m := newModule(b)
		xfer(b, 256<<20, func() error {
			return m.Put(b.Context(), []filem.Transfer{{Local: src, Remote: filem.Remote{Path: dst}}})
		})
	})
}

func xfer(b *testing.B, n int64, do func() error) {
	b.SetBytes(n)
	for b.Loop() {
		if err := do(); err != nil {
			b.Fatal(err)
		}
	}
	mbs := float64(n) * float64(b.N) / b.Elapsed().Seconds() / 1e6
	b.ReportMetric(mbs/float64(runtime.GOMAXPROCS(0)), "MB/s/core")
}

// The node stops answering (a hung node, a cut network) while the
// connection stays open: keepalive notices, the transfer fails. The
// interval leaves headroom for a loaded machine, where a 300 ms one was
// missed by a live sshd and ended every attempt before the stop.
func TestNodeHangs(t *testing.T) {
	s := filemtest.StartSSHD(t)
	m := newModule(t, to(s, mca.Setting{Name: ParamKeepalive, Value: "2s"})...)
	local := t.TempDir()
	src := filepath.Join(local, "big")
	bigFile(t, src, 256<<20)
	// The sessions are stopped once the temporary file has 1 MiB. On a
	// busy machine the whole transfer can end before the watcher looks:
	// then it is tried again into a fresh folder.
	var err error
	var remote string
	for attempt := 1; ; attempt++ {
		remote = t.TempDir()
		ctx, cancel := context.WithCancel(t.Context())
		stopped := make(chan int, 1)
		go func() {
			n := 0
			if _, werr := filemtest.WaitWrite(ctx, remote, fscopy.TempMarker, 1<<20); werr == nil {
				n = s.SignalSessions(syscall.SIGSTOP)
			}
			stopped <- n
		}()
		err = m.Put(t.Context(), []filem.Transfer{{Local: src, Remote: filem.Remote{Host: s.Host(), Path: filepath.Join(remote, "big")}}})
		cancel()
		if n := <-stopped; n > 0 {
			break
		}
		if attempt == 5 {
			t.Fatalf("the transfer finished %d times before a session could be stopped (last: %v)", attempt, err)
		}
	}
	if !errors.Is(err, filem.ErrUnreachable) || !strings.Contains(err.Error(), "lost during the transfer") {
		t.Fatalf("put to a node that stopped answering: %v, want ErrUnreachable", err)
	}
	noTemps(t, remote)
}
