package rsh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"gompi/frameworks/filem"
)

// target is a parsed Remote.Host.
type target struct {
	user, host string
	port       int
	name       string // as the user wrote it, for messages
}

func parseTarget(h string) (target, error) {
	user, host, port, err := filem.ParseHost(h)
	if err != nil {
		return target{}, err
	}
	return target{user: user, host: host, port: port, name: h}, nil
}

// sshDest is the host argument of ssh: [user@]host.
func (t target) sshDest() string {
	if t.user != "" {
		return t.user + "@" + t.host
	}
	return t.host
}

// scpPath is the remote operand of scp: [user@]host:path, an IPv6
// address in brackets.
func (t target) scpPath(p string) string {
	h := t.host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if t.user != "" {
		h = t.user + "@" + h
	}
	return h + ":" + p
}

// runner runs the ssh and scp commands of one module.
type runner struct {
	rsh, rcp         []string // command and its fixed words
	sshArgs, scpArgs []string
	prepare          func() error // before any command
}

// stderrLimit bounds how much of a command's error output is kept.
const stderrLimit = 16 << 10

// result is what a finished command left.
type result struct {
	stdout []byte
	stderr string
	code   int // exit status; -1 when killed or not started
	err    error
}

// ssh runs script with sh on t's node, the words of args as its $1, $2...
func (r *runner) ssh(ctx context.Context, t target, stdin io.Reader, stdout io.Writer, script string, args ...string) result {
	if err := r.prepare(); err != nil {
		return result{code: -1, err: err}
	}
	words := append(append([]string(nil), r.rsh[1:]...), r.sshArgs...)
	// BatchMode: a prompt would hang a daemon. Given after the user's
	// options, which win where they say otherwise (ssh keeps the first).
	words = append(words, "-o", "BatchMode=yes")
	if t.port != 0 {
		words = append(words, "-p", fmt.Sprint(t.port))
	}
	words = append(words, "--", t.sshDest(), remoteCommand(script, args...))
	return run(ctx, r.rsh[0], words, stdin, stdout)
}

// scp copies from to to (one of them remote, as scpPath writes it).
func (r *runner) scp(ctx context.Context, t target, from, to string) result {
	if err := r.prepare(); err != nil {
		return result{code: -1, err: err}
	}
	words := append(append([]string(nil), r.rcp[1:]...), r.scpArgs...)
	words = append(words, "-p", "-q", "-o", "BatchMode=yes")
	if t.port != 0 {
		words = append(words, "-P", fmt.Sprint(t.port))
	}
	words = append(words, "--", from, to)
	return run(ctx, r.rcp[0], words, nil, nil)
}

func run(ctx context.Context, prog string, args []string, stdin io.Reader, stdout io.Writer) result {
	cmd := exec.CommandContext(ctx, prog, args...)
	// Its own process group, so a cancelled transfer ends scp's ssh child
	// too, not only scp.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	errBuf := &limitBuffer{max: stderrLimit}
	cmd.Stdin, cmd.Stderr = stdin, errBuf
	if stdout != nil {
		cmd.Stdout = stdout
	} else {
		cmd.Stdout = &out
	}
	err := cmd.Run()
	res := result{stdout: out.Bytes(), stderr: strings.TrimSpace(errBuf.String()), code: -1, err: err}
	var ee *exec.ExitError
	switch {
	case err == nil:
		res.code = 0
	case errors.As(err, &ee) && ee.Exited():
		res.code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		res.err = ctx.Err()
	}
	return res
}

// limitBuffer keeps the first max bytes written to it.
type limitBuffer struct {
	bytes.Buffer
	max int
}

func (l *limitBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.Len(); room > 0 {
		l.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// Markers in ssh's and scp's own messages, by what they mean.
var (
	unreachableMarks = []string{"Could not resolve hostname", "Connection refused", "Connection timed out",
		"No route to host", "Network is unreachable", "Connection closed", "Connection reset", "connection reset",
		"Broken pipe", "lost connection", "connect to host", "closed by remote host", "kex_exchange_identification",
		"Operation timed out", "Timeout, server"}
	hostKeyMarks = []string{"Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED", "No ED25519 host key is known",
		"host key is known", "Host key for"}
	authMarks = []string{"Permission denied (", "Too many authentication failures", "no mutual signature"}
)

func hasAny(s string, marks []string) bool {
	for _, m := range marks {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// failure turns a failed ssh or scp into an error that says what went
// wrong in ssh's own words and what to do. ssh exits with 255 for its own
// failures; the scripts here never do. started says the node was reached
// before, so a connection failure means it was lost during the transfer.
func (r *runner) failure(what string, t target, res result, started bool) error {
	said := res.stderr
	if said == "" {
		said = "(it printed nothing)"
	}
	switch {
	case res.err != nil && (errors.Is(res.err, context.Canceled) || errors.Is(res.err, context.DeadlineExceeded)):
		return res.err
	case res.code == -1 && res.err != nil && !isExit(res.err):
		return fmt.Errorf("filem/rsh: %s: %w", what, res.err)
	case hasAny(said, hostKeyMarks):
		return fmt.Errorf("filem/rsh: %s: the host key of %s is not known or has changed; ssh said: %s; add the node's key to the known_hosts file ssh uses (after checking its fingerprint), e.g. with ssh-keyscan, or name that file with -o UserKnownHostsFile=... in %s",
			what, t.name, said, ParamArgs)
	case hasAny(said, authMarks):
		return fmt.Errorf("filem/rsh: %s: %s refused the login; ssh said: %s; install your public key in ~/.ssh/authorized_keys on the node or name a key with -i in %s",
			what, t.name, said, ParamArgs)
	case (res.code == 255 || hasAny(said, unreachableMarks)) && started:
		return fmt.Errorf("filem/rsh: %s: lost the connection to %s during the transfer (node down, sshd killed or network cut; exit status %d); ssh said: %s: %w", what, t.name, res.code, said, filem.ErrUnreachable)
	case res.code == 255 || hasAny(said, unreachableMarks):
		return fmt.Errorf("filem/rsh: %s: cannot reach %s (exit status %d); ssh said: %s: %w", what, t.name, res.code, said, filem.ErrUnreachable)
	}
	return fmt.Errorf("filem/rsh: %s: exit status %d; it said: %s", what, res.code, said)
}

func isExit(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee)
}

// remoteCommand writes `sh -c 'script' sh 'arg'...` for the remote login
// shell, every word single-quoted so nothing in a path is interpreted.
func remoteCommand(script string, args ...string) string {
	words := []string{"sh", "-c", shellQuote(script), "sh"}
	for _, a := range args {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// scpOptions derives scp's options from ssh options (filem_rsh_args), so
// the same words as plm_ssh_args serve both: the port is -P for scp, the
// user and a few others become -o Option=value, and options that only
// concern an interactive session are left out.
func scpOptions(ssh []string) ([]string, error) {
	var out []string
	for i := 0; i < len(ssh); i++ {
		w := ssh[i]
		if !strings.HasPrefix(w, "-") || w == "-" {
			return nil, fmt.Errorf("%q is not an option; %s takes ssh options only (the host and command are added)", w, ParamArgs)
		}
		if w == "--" {
			return nil, fmt.Errorf("%q is not allowed in %s", w, ParamArgs)
		}
		flags := w[1:]
		for j := 0; j < len(flags); j++ {
			f := flags[j]
			if !strings.ContainsRune(sshWithArg, rune(f)) {
				switch {
				case strings.ContainsRune("46Cqv", rune(f)):
					out = append(out, "-"+string(f))
				case strings.ContainsRune("AaTnxXYykKg", rune(f)):
					// session-only (forwarding, tty): nothing to do for a copy
				default:
					return nil, fmt.Errorf("ssh option -%c cannot be used for file transfers (it changes what ssh runs); remove it from %s", f, ParamArgs)
				}
				continue
			}
			// The option's argument is the rest of this word or the next word.
			arg := flags[j+1:]
			if arg == "" {
				i++
				if i >= len(ssh) {
					return nil, fmt.Errorf("ssh option -%c needs a value in %s", f, ParamArgs)
				}
				arg = ssh[i]
			}
			switch f {
			case 'c', 'F', 'i', 'J', 'o':
				out = append(out, "-"+string(f), arg)
			case 'p':
				out = append(out, "-P", arg)
			case 'l':
				out = append(out, "-o", "User="+arg)
			case 'S':
				out = append(out, "-o", "ControlPath="+arg)
			case 'b':
				out = append(out, "-o", "BindAddress="+arg)
			case 'm':
				out = append(out, "-o", "MACs="+arg)
			case 'E', 'e', 'B', 'I', 'w', 'W', 'L', 'R', 'D', 'O', 'Q':
				return nil, fmt.Errorf("ssh option -%c cannot be passed on to scp; give it as -o Option=value in %s, or leave it out", f, ParamArgs)
			}
			break
		}
	}
	return out, nil
}

// sshWithArg lists the ssh options that take a value.
const sshWithArg = "BbcDEeFIiJLlmOopQRSWw"
