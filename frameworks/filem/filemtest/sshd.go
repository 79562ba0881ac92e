package filemtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SSHDPath is where Debian's openssh-server puts the daemon.
const SSHDPath = "/usr/sbin/sshd"

// InstallHint says how to get what the ssh tests need.
const InstallHint = "apt-get install -y openssh-server openssh-client"

// SSHD is a private OpenSSH server on 127.0.0.1 for tests: its own host
// key, one authorized user key, root login, the sftp subsystem. The host
// shares this machine's file system, so a test can look at what a
// "remote" transfer did.
type SSHD struct {
	Port       int
	Dir        string // keys, config and known_hosts
	UserKey    string // private key file of the authorized user (root)
	KnownHosts string // a known_hosts file holding the server's host key
	HostKey    string // the server's public host key line ("ssh-ed25519 AAAA...")

	cmd     *exec.Cmd
	logMu   sync.Mutex
	log     bytes.Buffer
	stopped chan struct{}
}

// NeedSSH skips the test when this machine cannot run the ssh tests
// (outside CI), and fails it in CI, where .ci/run installs what they need.
func NeedSSH(t testing.TB) {
	t.Helper()
	var missing []string
	for _, p := range []string{SSHDPath, "ssh", "scp", "ssh-keygen"} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	switch {
	case len(missing) > 0:
		unavailable(t, fmt.Sprintf("no %s: install with `%s`", strings.Join(missing, ", "), InstallHint))
	case os.Getuid() != 0:
		// sshd must read its host key and switch to the logging-in user.
		unavailable(t, "the ssh tests run a private sshd, which needs root")
	}
}

func unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// StartSSHD starts a server for the test; it is stopped when the test ends.
func StartSSHD(t testing.TB) *SSHD {
	t.Helper()
	NeedSSH(t)
	dir := t.TempDir()
	for _, k := range []string{"host", "user", "stranger"} {
		out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", k, "-f", filepath.Join(dir, k)).CombinedOutput()
		if err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "user.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	hostPub, err := os.ReadFile(filepath.Join(dir, "host.pub"))
	if err != nil {
		t.Fatal(err)
	}
	// The privilege separation directory sshd insists on.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	s := &SSHD{
		Dir:        dir,
		UserKey:    filepath.Join(dir, "user"),
		KnownHosts: filepath.Join(dir, "known_hosts"),
		HostKey:    strings.Join(strings.Fields(string(hostPub))[:2], " "),
	}
	s.start(t, 0)
	t.Cleanup(s.Stop)
	return s
}

// start runs sshd on port (0: a free one) and waits until it listens. A
// free port is found by listening on it and closing it, so another
// process may take it before sshd binds it: then sshd is tried again on
// another.
func (s *SSHD) start(t testing.TB, port int) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p := port
		if p == 0 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			p = l.Addr().(*net.TCPAddr).Port
			l.Close()
		}
		err := s.run(p)
		if err == nil {
			return
		}
		if port != 0 || attempt == 5 || !errors.Is(err, errPortTaken) {
			t.Fatal(err)
		}
	}
}

// errPortTaken is wrapped when sshd could not bind its port.
var errPortTaken = errors.New("port taken")

// run starts sshd on port and waits until it listens.
func (s *SSHD) run(port int) error {
	s.Port = port
	known := fmt.Sprintf("[127.0.0.1]:%d %s\n", port, s.HostKey)
	if err := os.WriteFile(s.KnownHosts, []byte(known), 0o600); err != nil {
		return err
	}
	// MaxStartups and MaxSessions are raised so concurrent transfers are
	// never turned away the way a busy default server would.
	//
	// SetEnv SHLVL=1: sshd runs every command through the user's login
	// shell, and bash, seeing SSH_CLIENT at shell level 1, sources
	// ~/.bashrc first. On the machines the suite runs on, root's .bashrc
	// runs `pyenv init`, which took 0.45 s of each command (25 ms
	// without): the kits spent most of their time there, measuring the
	// dotfiles rather than gompi. At level 2 bash leaves it alone; the
	// commands still run under the login shell, as they do on a node.
	conf := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %[2]s/host
AuthorizedKeysFile %[2]s/authorized_keys
PermitRootLogin yes
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
MaxStartups 200
MaxSessions 100
SetEnv SHLVL=1
Subsystem sftp internal-sftp
PidFile %[2]s/sshd.pid
`, port, s.Dir)
	cfg := filepath.Join(s.Dir, "sshd_config")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(SSHDPath, "-D", "-e", "-f", cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.stopped = cmd, make(chan struct{})
	s.logMu.Lock()
	s.log.Reset()
	s.logMu.Unlock()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.logMu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.logMu.Unlock()
			if strings.Contains(sc.Text(), "Server listening on 127.0.0.1 port") {
				select {
				case ready <- true:
				default:
				}
			}
		}
		ready <- false
	}()
	go func() {
		cmd.Wait()
		close(s.stopped)
	}()
	select {
	case ok := <-ready:
		if ok {
			return nil
		}
		<-s.stopped
		if strings.Contains(s.Log(), "Address already in use") {
			return fmt.Errorf("sshd on port %d: %w:\n%s", port, errPortTaken, s.Log())
		}
		return fmt.Errorf("sshd ended before listening:\n%s", s.Log())
	case <-time.After(time.Minute):
		return fmt.Errorf("sshd not listening after a minute:\n%s", s.Log())
	}
}

// Log returns what sshd logged so far.
func (s *SSHD) Log() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.log.String()
}

// Host is the Remote.Host that reaches the server as root.
func (s *SSHD) Host() string { return "root@127.0.0.1:" + strconv.Itoa(s.Port) }

// SSHArgs are the ssh options that reach the server with the user key,
// checking the host key strictly against KnownHosts.
func (s *SSHD) SSHArgs() string {
	return fmt.Sprintf("-F /dev/null -p %d -i %s -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes -o BatchMode=yes -o LogLevel=ERROR",
		s.Port, s.UserKey, s.KnownHosts)
}

// StrangerKey is a private key the server does not accept.
func (s *SSHD) StrangerKey() string { return filepath.Join(s.Dir, "stranger") }

// Sessions returns the pids of the processes serving connections: sshd's
// descendants, which end when their connection does.
func (s *SSHD) Sessions() []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the parenthesised command: state, ppid, ...
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	root := s.cmd.Process.Pid
	var out []int
	for pid := range parent {
		for p, depth := parent[pid], 0; p > 1 && depth < 64; p, depth = parent[p], depth+1 {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// KillSessions kills every process serving a connection, as a crashed or
// killed session would end; the server keeps listening. It returns how
// many it killed.
func (s *SSHD) KillSessions() int { return s.SignalSessions(syscall.SIGKILL) }

// SignalSessions sends sig to every process serving a connection and
// returns how many there were: SIGSTOP makes the node stop answering
// while its connections stay open, as a hung node or a cut network does.
func (s *SSHD) SignalSessions(sig syscall.Signal) int {
	pids := s.Sessions()
	for _, pid := range pids {
		syscall.Kill(pid, sig)
	}
	return len(pids)
}

// Stop kills the server and its sessions, as a node going down would.
func (s *SSHD) Stop() {
	if s.cmd == nil || isClosed(s.stopped) {
		return
	}
	// Stopped, the server forks no new session while its existing ones are
	// found (by parentage, which ends with it) and killed.
	syscall.Kill(s.cmd.Process.Pid, syscall.SIGSTOP)
	s.KillSessions()
	s.cmd.Process.Kill()
	<-s.stopped
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Restart starts the server again on the same port after Stop.
func (s *SSHD) Restart(t testing.TB) {
	t.Helper()
	s.start(t, s.Port)
}
