package e2e

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const sshdPath = "/usr/sbin/sshd"

// startSSHD runs a private sshd on 127.0.0.1 on a free port, with a
// generated host key and a generated user key, and returns the ssh
// arguments (plm_ssh_args) that reach it.
func startSSHD(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(sshdPath); err != nil {
		msg := fmt.Sprintf("no %s: install it with `apt-get install -y openssh-server`", sshdPath)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if os.Getuid() != 0 {
		// sshd must read its host key and switch to the logging-in user.
		t.Skip("the ssh test runs sshd, which needs root")
	}
	dir, err := os.MkdirTemp(root, "ssh")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"host", "user"} {
		out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput()
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
	// The privilege separation directory sshd insists on.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	conf := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s/host
AuthorizedKeysFile %s/authorized_keys
PermitRootLogin yes
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PidFile %s/sshd.pid
`, port, dir, dir, dir)
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	sshd := exec.Command(sshdPath, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	stderr, err := sshd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sshd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sshd.Process.Kill()
		sshd.Wait()
	})
	// sshd says when it listens; read its log until then.
	ready := make(chan error, 1)
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "Server listening on 127.0.0.1 port") {
				ready <- nil
				for sc.Scan() { // keep draining so sshd never blocks on its log
				}
				return
			}
		}
		ready <- fmt.Errorf("sshd ended: %s", log.String())
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("sshd not listening after a minute")
	}
	return fmt.Sprintf("-F /dev/null -p %d -i %s/user -o UserKnownHostsFile=%s/known_hosts -o StrictHostKeyChecking=no -o BatchMode=yes -o LogLevel=ERROR",
		port, dir, dir)
}

func TestSSH(t *testing.T) {
	sshArgs := startSSHD(t)
	sessions := t.TempDir()
	j := start(t, "-np", "4", "--host", "127.0.0.1:2,localhost:2", "--mca", "plm", "ssh", "--mca", "plm_ssh_args", sshArgs,
		"--mca", "plm_base_session_dir", sessions, "--tag-output", rankprog(), "-barriers", "2")
	code, out, errs := j.wait()
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, errs)
	}
	tag := regexp.MustCompile(`^\[[0-9a-f]{8},(\d)\]<stdout>:rank (\d) of 4 on (\S+): modex saw 127.0.0.1,127.0.0.1,localhost,localhost$`)
	nodes := map[string]string{"0": "127.0.0.1", "1": "127.0.0.1", "2": "localhost", "3": "localhost"}
	for _, l := range out {
		m := tag.FindStringSubmatch(l)
		if m == nil || m[1] != m[2] || nodes[m[1]] != m[3] {
			t.Errorf("unexpected line %q", l)
			continue
		}
		delete(nodes, m[1])
	}
	if len(nodes) != 0 {
		t.Errorf("no output from ranks %v:\n%s", nodes, strings.Join(out, "\n"))
	}
	jobID := regexp.MustCompile(`^\[([0-9a-f]{8}),`).FindStringSubmatch(out[0])[1]
	noSurvivors(t, "after the ssh job", func() []int { return withArg(jobID) })
	if left, _ := os.ReadDir(sessions); len(left) != 0 {
		t.Errorf("node directories left behind: %v", left)
	}

	t.Run("mpi", func(t *testing.T) {
		ring := filepath.Join(bin, "mpiring")
		_, one, errs := start(t, "-np", "1", ring).wait()
		code, four, errs4 := start(t, "-np", "4", "--host", "127.0.0.1:2,localhost:2", "--mca", "plm", "ssh", "--mca", "plm_ssh_args", sshArgs,
			ring).wait()
		if code != 0 || len(one) != 1 || len(four) != 1 {
			t.Fatalf("exit status %d, outputs %q and %q; stderr:\n%s\n%s", code, one, four, errs, errs4)
		}
		if a, b := strings.Fields(one[0])[1], strings.Fields(four[0])[1]; a != b || !strings.HasSuffix(four[0], "ring 4/4") {
			t.Errorf("-np 4 over ssh printed %q, -np 1 %q: want the same checksum", four[0], one[0])
		}
	})
	t.Run("heat", func(t *testing.T) {
		heat := []string{filepath.Join(bin, "heat"), "-size", "48", "-steps", "30"}
		_, one, errs := start(t, append([]string{"-np", "1"}, heat...)...).wait()
		code, four, errs4 := start(t, append([]string{"-np", "4", "--host", "127.0.0.1:2,localhost:2", "--mca", "plm", "ssh", "--mca", "plm_ssh_args", sshArgs}, heat...)...).wait()
		a, ok1 := heatChecksum(one, "1")
		b, ok4 := heatChecksum(four, "4")
		if code != 0 || !ok1 || !ok4 {
			t.Fatalf("exit status %d, outputs %q and %q; stderr:\n%s\n%s", code, one, four, errs, errs4)
		}
		if a != b {
			t.Errorf("heat -np 4 over ssh: checksum %s, -np 1: %s", b, a)
		}
	})
	t.Run("rank fails", func(t *testing.T) {
		code, _, errs := start(t, "-np", "2", "--host", "127.0.0.1,localhost", "--mca", "plm", "ssh", "--mca", "plm_ssh_args", sshArgs,
			rankprog(), "-exit-rank", "1", "-exit-code", "3").wait()
		if code != 3 || !strings.Contains(errs, "gompirun: job aborted: rank 1 on node localhost exited with status 3\n") {
			t.Errorf("exit status %d, stderr:\n%s", code, errs)
		}
	})
	t.Run("gompirun killed", func(t *testing.T) {
		j := start(t, "-np", "2", "--host", "127.0.0.1,localhost", "--mca", "plm", "ssh", "--mca", "plm_ssh_args", sshArgs,
			"--mca", "plm_base_session_dir", sessions, rankprog(), "-sleep")
		j.waitReady(2)
		// The remote daemons and ranks are sshd's descendants, without the
		// job's mark: they are found by the job id on the daemons' command line
		// and by the pids gompi-ps reports.
		st := ps(t, "--json", fmt.Sprint(j.cmd.Process.Pid))
		var remote []int
		for _, d := range st[0].Daemons {
			remote = append(remote, d.PID)
		}
		for _, r := range st[0].Ranks {
			remote = append(remote, r.PID)
		}
		if len(withArg(st[0].Job)) != 2 || len(remote) != 4 {
			t.Fatalf("want 2 daemons of job %s and 4 remote processes, have %v and %v", st[0].Job, withArg(st[0].Job), remote)
		}
		j.signal(9)
		j.wait()
		noSurvivors(t, "remote daemons and ranks after SIGKILL to gompirun", func() []int {
			return scanProcs(func(pid int) bool { return slices.Contains(remote, pid) })
		})
		noSurvivors(t, "remote daemons after SIGKILL to gompirun", func() []int { return withArg(st[0].Job) })
	})
	t.Run("unreachable host", func(t *testing.T) {
		code, _, errs := start(t, "-np", "2", "--host", "127.0.0.1,no-such-host.invalid", "--mca", "plm", "ssh", "--mca", "plm_ssh_args", sshArgs,
			rankprog()).wait()
		if code != 1 || !regexp.MustCompile(`gompirun: start the daemon of node no-such-host.invalid: ssh \(pid \d+\) for node no-such-host.invalid exited with status 255; it said: .*no-such-host.invalid`).MatchString(errs) {
			t.Errorf("exit status %d, stderr:\n%s\nwant 1 and ssh's own message", code, errs)
		}
	})
}
