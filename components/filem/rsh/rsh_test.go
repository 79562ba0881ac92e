package rsh

import (
	"bytes"
	"errors"
	"fmt"
	"os"
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

func newModule(t testing.TB, settings ...mca.Setting) filem.Module {
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
	if c.Priority != 10 {
		t.Errorf("priority %d, want 10", c.Priority)
	}
	return c.Module
}

func args(s *filemtest.SSHD, more ...mca.Setting) []mca.Setting {
	return append([]mca.Setting{{Name: ParamArgs, Value: s.SSHArgs()}}, more...)
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
		{"no-multiplexing", []mca.Setting{{Name: ParamMultiplex, Value: "false"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.settings != nil {
				t.Skip("a login per command is slow; the defaults cover the kit in -short mode")
			}
			m := newModule(t, args(s, tc.settings...)...)
			filemtest.Run(t, func(t *testing.T) filem.Module { return filemtest.OnHost(m, s.Host()) })
		})
	}
}

func TestHostKeyAndLogin(t *testing.T) {
	s := filemtest.StartSSHD(t)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, args string
		want       []string
	}{
		{"unknown host key", strings.Replace(s.SSHArgs(), s.KnownHosts, empty, 1), []string{"host key of", "Host key verification failed", "ssh-keyscan"}},
		{"key not accepted", strings.Replace(s.SSHArgs(), s.UserKey, s.StrangerKey(), 1), []string{"refused the login", "Permission denied", "authorized_keys"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newModule(t, mca.Setting{Name: ParamArgs, Value: tc.args})
			src := filepath.Join(t.TempDir(), "f")
			os.WriteFile(src, []byte("x"), 0o600)
			for _, err := range []error{
				m.Put(t.Context(), []filem.Transfer{{Local: src, Remote: filem.Remote{Host: s.Host(), Path: src + ".out"}}}),
				m.Get(t.Context(), []filem.Transfer{{Local: src + ".back", Remote: filem.Remote{Host: s.Host(), Path: src}}}),
				m.Remove(t.Context(), []filem.Remote{{Host: s.Host(), Path: src}}),
			} {
				if err == nil {
					t.Fatal("succeeded")
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if errors.Is(err, filem.ErrUnreachable) {
					t.Errorf("not an unreachable host: %v", err)
				}
			}
			if _, err := os.Stat(src); err != nil {
				t.Errorf("the source was touched: %v", err)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	s := filemtest.StartSSHD(t)
	port := s.Port
	s.Stop()
	m := newModule(t, args(s)...)
	src := filepath.Join(t.TempDir(), "f")
	os.WriteFile(src, []byte("x"), 0o600)
	for _, host := range []string{fmt.Sprintf("root@127.0.0.1:%d", port), "no-such-node.invalid"} {
		err := m.Put(t.Context(), []filem.Transfer{{Local: src, Remote: filem.Remote{Host: host, Path: "/tmp/x"}}})
		if !errors.Is(err, filem.ErrUnreachable) || !strings.Contains(err.Error(), "cannot reach "+host) {
			t.Errorf("%s: %v, want filem.ErrUnreachable", host, err)
		}
	}
}

// bigFile writes a file of n bytes that does not compress.
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

func noTemps(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && fscopy.IsTemp(d.Name()) {
			t.Errorf("temporary %s left behind", p)
		}
		return nil
	})
}

func same(t *testing.T, a, b string) {
	t.Helper()
	x, err1 := os.ReadFile(a)
	y, err2 := os.ReadFile(b)
	if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
		t.Errorf("%s and %s differ (%v, %v)", a, b, err1, err2)
	}
}

func TestConnectionDropped(t *testing.T) {
	s := filemtest.StartSSHD(t)
	// scp at 40 MB/s: the 64 MiB file is still on its way when the
	// sessions are killed.
	m := newModule(t, args(s, mca.Setting{Name: ParamRcpArgs, Value: "-l 320000"})...)
	local, remote := t.TempDir(), t.TempDir()
	src := filepath.Join(local, "big")
	bigFile(t, src, 64<<20)
	tree := filepath.Join(local, "tree")
	os.MkdirAll(tree, 0o755)
	bigFile(t, filepath.Join(tree, "big"), 256<<20)
	for _, tc := range []struct {
		name, src, dst string
	}{
		{"file", src, filepath.Join(remote, "big")},
		{"tree", tree, filepath.Join(remote, "tree")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.MkdirAll(tc.dst, 0o755)
			if err := os.WriteFile(filepath.Join(tc.dst, "old"), []byte("the previous checkpoint"), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.name == "file" {
				os.RemoveAll(tc.dst)
				os.WriteFile(tc.dst, []byte("the previous checkpoint"), 0o644)
			}
			killed := make(chan int, 1)
			go func() {
				dir, marker := remote, fscopy.TempMarker
				if tc.name == "tree" {
					// The file grows inside the temporary directory.
					var err error
					if dir, err = filemtest.WaitWrite(t.Context(), remote, fscopy.TempMarker, 0); err != nil {
						t.Error(err)
					}
					marker = ""
				}
				if _, err := filemtest.WaitWrite(t.Context(), dir, marker, 1<<20); err != nil {
					t.Error(err)
				}
				killed <- s.KillSessions()
			}()
			err := m.Put(t.Context(), []filem.Transfer{{Local: tc.src, Remote: filem.Remote{Host: s.Host(), Path: tc.dst}}})
			if n := <-killed; n == 0 {
				t.Fatal("no session was killed")
			}
			if !errors.Is(err, filem.ErrUnreachable) || !strings.Contains(err.Error(), "during the transfer") {
				t.Fatalf("put while the session was killed: %v, want a lost connection wrapping ErrUnreachable", err)
			}
			old := tc.dst
			if tc.name == "tree" {
				old = filepath.Join(tc.dst, "old")
			}
			if b, _ := os.ReadFile(old); string(b) != "the previous checkpoint" {
				t.Errorf("the earlier destination was damaged: %q", b)
			}
			noTemps(t, remote)
		})
	}
}

func TestServerGone(t *testing.T) {
	s := filemtest.StartSSHD(t)
	m := newModule(t, args(s, mca.Setting{Name: ParamRcpArgs, Value: "-l 320000"})...)
	local, remote := t.TempDir(), t.TempDir()
	src := filepath.Join(local, "big")
	bigFile(t, src, 64<<20)
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
	m := newModule(t, args(s)...)
	local := t.TempDir()
	src := filepath.Join(local, "state")
	bigFile(t, src, 4<<20)
	tree := filepath.Join(local, "tree")
	os.MkdirAll(tree, 0o755)
	bigFile(t, filepath.Join(tree, "state"), 4<<20)
	for _, tc := range []struct{ name, src string }{{"file", src}, {"tree", tree}} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(disk, tc.name)
			if err := os.WriteFile(dst, []byte("the previous checkpoint"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := m.Put(t.Context(), []filem.Transfer{{Local: tc.src, Remote: filem.Remote{Host: s.Host(), Path: dst}}})
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("put onto a full disk: %v, want ENOSPC", err)
			}
			if b, _ := os.ReadFile(dst); string(b) != "the previous checkpoint" {
				t.Errorf("the earlier destination was damaged: %d bytes", len(b))
			}
			noTemps(t, disk)
		})
	}
}

func TestBroadcastGather(t *testing.T) {
	s := filemtest.StartSSHD(t)
	m := newModule(t, args(s)...)
	root := t.TempDir()
	src := filepath.Join(root, "snap")
	os.MkdirAll(src, 0o755)
	bigFile(t, filepath.Join(src, "state"), 3<<20)
	var nodes, from []filem.Remote
	for i := range 5 {
		nodes = append(nodes, filem.Remote{Host: s.Host(), Path: filepath.Join(root, fmt.Sprint("node", i), "snap")})
	}
	if err := filem.Broadcast(t.Context(), m, src, nodes); err != nil {
		t.Fatal(err)
	}
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
}

// Paths with spaces, quotes and shell syntax reach the node unchanged.
func TestAwkwardNames(t *testing.T) {
	s := filemtest.StartSSHD(t)
	m := newModule(t, args(s)...)
	root := t.TempDir()
	for _, name := range []string{"a b", "it's", "$(touch pwned)", "x;y", `"q"`, "-dash"} {
		src := filepath.Join(root, "src", name)
		os.MkdirAll(filepath.Dir(src), 0o755)
		os.WriteFile(src, []byte(name), 0o600)
		dst := filepath.Join(root, "dst "+name, name)
		if err := m.Put(t.Context(), []filem.Transfer{{Local: src, Remote: filem.Remote{Host: s.Host(), Path: dst}}}); err != nil {
			t.Errorf("put %q: %v", name, err)
			continue
		}
		same(t, src, dst)
		if err := m.Remove(t.Context(), []filem.Remote{{Host: s.Host(), Path: dst}}); err != nil {
			t.Errorf("remove %q: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("HOME"), "pwned")); err == nil {
		t.Error("a path was run as a command")
	}
}

func TestControlDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ctl")
	if err := makeControlDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := makeControlDir(dir); err != nil {
		t.Errorf("an existing private directory: %v", err)
	}
	os.Chmod(dir, 0o777)
	if err := makeControlDir(dir); err == nil || !strings.Contains(err.Error(), "not a directory private") {
		t.Errorf("a directory others can write: %v", err)
	}
}

func TestSCPOptions(t *testing.T) {
	for _, tc := range []struct {
		ssh  string
		scp  string
		fail string
	}{
		{"", "", ""},
		{"-F /dev/null -p 2222 -i k -o UserKnownHostsFile=f -o StrictHostKeyChecking=no -o BatchMode=yes -o LogLevel=ERROR",
			"-F /dev/null -P 2222 -i k -o UserKnownHostsFile=f -o StrictHostKeyChecking=no -o BatchMode=yes -o LogLevel=ERROR", ""},
		{"-p2222 -lroot -qC -T -x", "-P 2222 -o User=root -q -C", ""},
		{"-4 -J jump -c aes128-ctr -S /tmp/ctl -b 10.0.0.1", "-4 -J jump -c aes128-ctr -o ControlPath=/tmp/ctl -o BindAddress=10.0.0.1", ""},
		{"-L 80:h:80", "", "cannot be passed on"},
		{"-N", "", "cannot be used"},
		{"-p", "", "needs a value"},
		{"host", "", "not an option"},
	} {
		got, err := scpOptions(strings.Fields(tc.ssh))
		if tc.fail != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fail) {
				t.Errorf("scpOptions(%q) = %q, %v; want an error saying %q", tc.ssh, got, err, tc.fail)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != tc.scp {
			t.Errorf("scpOptions(%q) = %q, %v; want %q", tc.ssh, strings.Join(got, " "), err, tc.scp)
		}
	}
}

func FuzzSCPOptions(f *testing.F) {
	for _, s := range []string{"-p 22 -i k", "-qC", "-oUser=x", "-lroot -p2", "-L 1:h:2", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words := strings.Fields(s)
		out, err := scpOptions(words)
		if err != nil {
			return
		}
		// Every value comes from the input, at most under a known -o name.
		for _, w := range out {
			if strings.HasPrefix(w, "-") {
				continue
			}
			v := w
			for _, p := range []string{"User=", "ControlPath=", "BindAddress=", "MACs="} {
				if strings.HasPrefix(w, p) && !strings.Contains(s, w) {
					v = w[len(p):]
				}
			}
			if !strings.Contains(s, v) {
				t.Fatalf("%q: derived value %q from nowhere", s, w)
			}
		}
	})
}

func TestBadParams(t *testing.T) {
	for _, p := range []mca.Setting{
		{Name: ParamConcurrency, Value: "0"}, {Name: ParamArgs, Value: "-N"}, {Name: ParamRsh, Value: " "},
	} {
		params := mca.NewParams()
		set := frameworks.New(params)
		set.FileM.Register(New())
		vals, err := params.ResolveSettings([]mca.Setting{p})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = New().Query(t.Context(), mca.Query{Values: vals, Role: mca.RoleDaemon, Priority: 10})
		if err == nil || !strings.Contains(err.Error(), p.Name) {
			t.Errorf("%s = %q: %v, want an error naming the parameter", p.Name, p.Value, err)
		}
	}
	params := mca.NewParams()
	set := frameworks.New(params)
	set.FileM.Register(New())
	vals, _ := params.ResolveSettings([]mca.Setting{{Name: ParamRcp, Value: "no-such-scp-command"}})
	_, _, err := New().Query(t.Context(), mca.Query{Values: vals, Role: mca.RoleDaemon, Priority: 10})
	if !errors.Is(err, mca.ErrSkip) || !strings.Contains(err.Error(), InstallHint) {
		t.Errorf("a missing scp: %v, want a skip saying how to install it", err)
	}
}

// BenchmarkPut measures MB/s of one 256 MiB file to 127.0.0.1 (scp), a
// 256 MiB tree (tar over ssh), and per processor of this machine.
func BenchmarkPut(b *testing.B) {
	s := filemtest.StartSSHD(b)
	src := filepath.Join(b.TempDir(), "big")
	bigFile(b, src, 256<<20)
	tree := filepath.Join(b.TempDir(), "tree")
	os.MkdirAll(tree, 0o755)
	bigFile(b, filepath.Join(tree, "big"), 256<<20)
	dst := filepath.Join(b.TempDir(), "big")
	m := newModule(b, args(s)...)
	for _, tc := range []struct{ name, src string }{{"file", src}, {"tree", tree}} {
		b.Run("put/"+tc.name, func(b *testing.B) {
			xfer(b, 256<<20, func() error {
				return m.Put(b.Context(), []filem.Transfer{{Local: tc.src, Remote: filem.Remote{Host: s.Host(), Path: dst}}})
			})
		})
		b.Run("get/"+tc.name, func(b *testing.B) {
			if err := m.Put(b.Context(), []filem.Transfer{{Local: tc.src, Remote: filem.Remote{Host: s.Host(), Path: dst}}}); err != nil {
				b.Fatal(err)
			}
			back := filepath.Join(b.TempDir(), "back")
			xfer(b, 256<<20, func() error {
				return m.Get(b.Context(), []filem.Transfer{{Local: back, Remote: filem.Remote{Host: s.Host(), Path: dst}}})
			})
		})
	}
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

// The node stops answering while the connection stays open: ssh's
// ServerAlive probes (set short here) notice, the transfer fails.
func TestNodeHangs(t *testing.T) {
	s := filemtest.StartSSHD(t)
	m := newModule(t, mca.Setting{Name: ParamArgs, Value: s.SSHArgs() + " -o ServerAliveInterval=1 -o ServerAliveCountMax=1"},
		mca.Setting{Name: ParamRcpArgs, Value: "-l 320000"})
	local, remote := t.TempDir(), t.TempDir()
	src := filepath.Join(local, "big")
	bigFile(t, src, 64<<20)
	stopped := make(chan int, 1)
	go func() {
		if _, err := filemtest.WaitWrite(t.Context(), remote, fscopy.TempMarker, 1<<20); err != nil {
			t.Error(err)
		}
		stopped <- s.SignalSessions(syscall.SIGSTOP)
	}()
	err := m.Put(t.Context(), []filem.Transfer{{Local: src, Remote: filem.Remote{Host: s.Host(), Path: filepath.Join(remote, "big")}}})
	if n := <-stopped; n == 0 {
		t.Fatal("no session was stopped")
	}
	if !errors.Is(err, filem.ErrUnreachable) || !strings.Contains(err.Error(), "during the transfer") {
		t.Fatalf("put to a node that stopped answering: %v, want ErrUnreachable", err)
	}
	noTemps(t, remote)
}
