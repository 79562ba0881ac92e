package rankclient

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"gompi/mca"
	"gompi/rte"
	"gompi/rte/control"
)

func TestInitOutsideAJob(t *testing.T) {
	t.Setenv(rte.EnvRank, "")
	if InJob() {
		t.Fatal("InJob with no rank in the environment")
	}
	if _, err := Init(context.Background()); !errors.Is(err, ErrNotLaunched) {
		t.Errorf("Init: %v, want ErrNotLaunched", err)
	}
}

func TestInitBadEnvironment(t *testing.T) {
	tests := []struct {
		rank, secret, err string
	}{
		{"x", "", "GOMPI_RANK=\"x\" is not a rank"},
		{"-1", "", "is not a rank"},
		{"0", "short", "GOMPI_JOB_SECRET"},
	}
	for _, tt := range tests {
		t.Setenv(rte.EnvRank, tt.rank)
		setSecretFD(t, tt.secret)
		if _, err := Init(context.Background()); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Init with rank %q secret %q: %v, want %q", tt.rank, tt.secret, err, tt.err)
		}
	}
	for _, v := range []string{"", "x", "1", "-3"} {
		t.Setenv(rte.EnvRank, "0")
		t.Setenv(rte.EnvSecretFD, v)
		if _, err := Init(context.Background()); err == nil || !strings.Contains(err.Error(), rte.EnvSecretFD) {
			t.Errorf("Init with %s=%q: %v", rte.EnvSecretFD, v, err)
		}
	}
}

// setSecretFD hands Init the secret text as a daemon does: a pipe that
// holds it and then ends, named by rte.EnvSecretFD. Init closes the read
// end (when it gets that far).
func setSecretFD(t *testing.T, text string) {
	t.Helper()
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.Write(fds[1], []byte(text)); err != nil {
		t.Fatal(err)
	}
	syscall.Close(fds[1])
	t.Setenv(rte.EnvSecretFD, strconv.Itoa(fds[0]))
}

// withData pairs the job's control secret with a new data-plane secret,
// as a daemon hands them to a rank.
func withData(t *testing.T, ctl control.Secret) control.RankSecrets {
	t.Helper()
	data, err := control.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return control.RankSecrets{Control: ctl, Data: data}
}

// TestSecretNotInEnvironment: Init takes the secrets from their
// descriptor, closes it and leaves neither the secrets nor the variable
// behind.
func TestSecretNotInEnvironment(t *testing.T) {
	secret, err := control.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	want := withData(t, secret)
	setSecretFD(t, want.Text())
	fd, _ := strconv.Atoi(os.Getenv(rte.EnvSecretFD))
	got, err := readSecrets()
	if err != nil || got != want {
		t.Fatalf("readSecrets = %v, %v", got, err)
	}
	if v, ok := os.LookupEnv(rte.EnvSecretFD); ok {
		t.Errorf("%s=%s left in the environment", rte.EnvSecretFD, v)
	}
	// Closed: the descriptor is gone (or, reused since, no pipe).
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO {
		t.Errorf("descriptor %d (the secret's pipe) is still open", fd)
	}
	for _, kv := range os.Environ() {
		if strings.Contains(kv, want.Control.Hex()) || strings.Contains(kv, want.Data.Hex()) {
			t.Errorf("a secret is in the environment: %s", kv)
		}
	}
}

// TestSecretsMalformed: the pipe must hold both secrets, whole: the
// control secret alone (what a daemon of an older gompi sent), a
// truncated or overlong data-plane secret, or trailing bytes are refused.
func TestSecretsMalformed(t *testing.T) {
	s := withData(t, control.Secret{})
	ctl, data := s.Control.Hex(), s.Data.Hex()
	for _, text := range []string{
		ctl,
		ctl + "\n",
		ctl + "\n" + data[:len(data)-2],
		ctl + "\n" + data + "00",
		ctl + "\n" + data + "\n",
		data[:8] + "\n" + data,
	} {
		setSecretFD(t, text)
		if got, err := readSecrets(); !errors.Is(err, control.ErrBadSecret) {
			t.Errorf("readSecrets of %q = %v, %v; want ErrBadSecret", text, got, err)
		}
	}
}

func TestSingleton(t *testing.T) {
	ctx := context.Background()
	c, err := Singleton(ctx, mca.SourceOptions{NoUserFiles: true, SysconfDir: t.TempDir(), MCA: []string{"plm_base_kill_grace=7s"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank() != 0 || c.Size() != 1 || c.Node() != "localhost" || c.NodeOf(0) != "localhost" || c.NodeOf(1) != "" || !rte.ValidJobID(c.Job()) {
		t.Errorf("singleton: rank %d size %d node %s job %s", c.Rank(), c.Size(), c.Node(), c.Job())
	}
	if got := c.Values().String("plm_base_kill_grace"); got != "7s" {
		t.Errorf("parameter from the command line: %q", got)
	}
	all, err := c.Modex(ctx, map[string]string{"addr": "x"})
	if err != nil || len(all) != 1 || all[0]["addr"] != "x" {
		t.Errorf("Modex = %v, %v", all, err)
	}
	if err := c.Barrier(ctx); err != nil {
		t.Error(err)
	}
	if err := c.Finalize(ctx); err != nil {
		t.Error(err)
	}
	if _, err := c.Modex(ctx, nil); !errors.Is(err, ErrFinalized) {
		t.Errorf("Modex after Finalize: %v, want ErrFinalized", err)
	}
}
