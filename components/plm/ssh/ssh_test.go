package plmssh

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"gompi/frameworks"
	"gompi/frameworks/filem/filemtest"
	"gompi/frameworks/plm"
	"gompi/frameworks/plm/plmtest"
	"gompi/mca"
)

// What the remote shell runs is exactly the words given.
func TestRemoteCommand(t *testing.T) {
	args := []string{"--job", "j1", "a b", "it's", `$(touch /tmp/x)`, "`id`", "", "*", "x;y", "\"q\"", "new\nline"}
	cmd := RemoteCommand("printf", append([]string{`%s\0`}, args...))
	out, err := exec.Command("sh", "-c", cmd).Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", cmd, err)
	}
	var got []string
	start := 0
	for i, b := range out {
		if b == 0 {
			got = append(got, string(out[start:i]))
			start = i + 1
		}
	}
	if len(got) != len(args) {
		t.Fatalf("%q ran with %q, want %q", cmd, got, args)
	}
	for i := range args {
		if got[i] != args[i] {
			t.Errorf("word %d: %q, want %q", i, got[i], args[i])
		}
	}
	if q := Quote("plain-word_1.2/x:y"); q != "plain-word_1.2/x:y" {
		t.Errorf("Quote quoted a plain word: %s", q)
	}
}

func FuzzQuote(f *testing.F) {
	for _, s := range []string{"a", "it's", "", "$x", "'\\''"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range s {
			if c == 0 {
				return // not representable in an argument
			}
		}
		out, err := exec.Command("sh", "-c", "printf %s "+Quote(s)).Output()
		if err != nil || string(out) != s {
			t.Fatalf("Quote(%q) = %s gives %q, %v", s, Quote(s), out, err)
		}
	})
}

func TestQuery(t *testing.T) {
	params := mca.NewParams()
	set := frameworks.New(params)
	set.PLM.Register(New())
	vals, err := params.ResolveSettings([]mca.Setting{{Name: ParamAgent, Value: "no-such-ssh-client"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := New().Query(context.Background(), mca.Query{Values: vals, Role: mca.RoleHNP}); !errors.Is(err, mca.ErrSkip) {
		t.Errorf("Query without an ssh client: %v, want a skip", err)
	}
	vals, _ = params.ResolveSettings([]mca.Setting{{Name: ParamAgent, Value: "sh"}}) // any program on $PATH
	m, _, err := New().Query(context.Background(), mca.Query{Values: vals, Role: mca.RoleHNP})
	if err != nil || m.Network() != "tcp" {
		t.Errorf("Query: %v, %v", m, err)
	}
	if _, _, err := New().Query(context.Background(), mca.Query{Values: vals, Role: mca.RoleDaemon}); !errors.Is(err, mca.ErrSkip) {
		t.Errorf("Query as a daemon: %v, want a skip", err)
	}
}

// TestConformance runs the PLM kit through a private sshd on this machine:
// its two node names are two ways of naming it.
func TestConformance(t *testing.T) {
	sshd := filemtest.StartSSHD(t)
	plmtest.Run(t, plmtest.Options{
		Nodes:   []string{"127.0.0.1", "root@127.0.0.1"},
		Network: "tcp",
		NewModule: func(t *testing.T, daemon string) plm.Module {
			return plmtest.Select(t, New(),
				mca.Setting{Name: ParamArgs, Value: sshd.SSHArgs()},
				mca.Setting{Name: ParamDaemonPath, Value: daemon})
		},
	})
}

// TestNoDaemon: with no daemon path set and no gompid beside the program
// or on $PATH, Launch fails with an error matching plm.ErrLaunch that says
// which parameter to set, before any ssh runs.
func TestNoDaemon(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	m := &module{agent: "ssh-that-must-not-run"}
	ds, err := m.Launch(t.Context(), plm.Spec{Nodes: []string{"n0"}})
	if !errors.Is(err, plm.ErrLaunch) || !strings.Contains(err.Error(), ParamDaemonPath) || ds != nil {
		t.Errorf("Launch = %v, %v; want no daemons and an error wrapping plm.ErrLaunch naming %s", ds, err, ParamDaemonPath)
	}
}
