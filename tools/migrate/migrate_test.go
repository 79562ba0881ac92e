package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"gompi/cli"
	"gompi/rte"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
	"gompi/rte/jobs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func runCtx(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	cmd := NewCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	code := cli.Execute(ctx, cmd, args, false)
	return code, out.String(), errb.String()
}

func run(args ...string) (int, string, string) { return runCtx(context.Background(), args...) }

func TestHelpGolden(t *testing.T) {
	code, out, errs := run("--help")
	got := out + errs
	path := filepath.Join("testdata", "help.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./tools/migrate -update)", err)
	}
	if code != 0 || got != string(want) {
		t.Errorf("status %d; --help differs from %s (go test ./tools/migrate -update rewrites it):\n%s", code, path, got)
	}
}

func TestUsage(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	tests := []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "which job? give the PID of its gompirun"},
		{[]string{"--off", "n1"}, 2, "which job? give the PID of its gompirun"},
		{[]string{"abc", "--off", "n1"}, 2, `"abc" is not a process id`},
		{[]string{"0", "--off", "n1"}, 2, `"0" is not a process id`},
		{[]string{"12"}, 2, "what to migrate? give --off NODES (every rank of those nodes) or --ranks RANKS"},
		{[]string{"12", "--onto", "n3"}, 2, "what to migrate?"},
		{[]string{"12", "--ranks", "2,x"}, 2, `invalid argument "2,x" for "-r, --ranks" flag: "x" is not a rank`},
		{[]string{"12", "--ranks", "-1"}, 2, "rank -1 is negative: ranks count from 0"},
		{[]string{"12", "-r", "3,-1"}, 2, "rank -1 is negative"},
		{[]string{"12", "--ranks="}, 2, "no ranks given"},
		{[]string{"12", "--ranks", "2,,5"}, 2, `empty rank in "2,,5"`},
		{[]string{"12", "--ranks", "4294967296"}, 2, "rank 4294967296 is too large"},
		{[]string{"12", "--off", "n1,,n2"}, 2, `empty node name in "n1,,n2"`},
		{[]string{"12", "-x", ",n1"}, 2, `empty node name in ",n1"`},
		{[]string{"12", "--off", "n1", "--onto", "n3,"}, 2, `empty node name in "n3,"`},
		{[]string{"12", "--off", "n1", "--onto", "a b"}, 2, `node name "a b" holds a space`},
		{[]string{"12", "--off", "n1", "--onto", "n1"}, 2, "node n1 is in both --off and --onto"},
		{[]string{"12", "--off", "n1", "--within", "-5s"}, 2, "--within -5s: want how long from now the fault is expected"},
		{[]string{"12", "--off", "n1", "--within", "5x"}, 2, `invalid argument "5x" for "--within" flag`},
		{[]string{"12", "--off", "n1", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"12", "--off", "n1", "-q"}, 2, "unknown shorthand flag: 'q'"},
		{[]string{"12", "13", "--off", "n1"}, 2, "accepts at most 1 arg"},
		{[]string{"12", "--hnp-pid", "13", "--off", "n1"}, 2, "give the job once: a PID, --hnp-pid or --hnp-jobid"},
		{[]string{"--hnp-pid", "-3", "--off", "n1"}, 2, "--hnp-pid -3 is not a process id"},
	}
	for _, tt := range tests {
		code, out, errs := run(tt.args...)
		if code != tt.code || !strings.Contains(errs, tt.want) || out != "" {
			t.Errorf("%q: status %d, stdout %q, stderr:\n%s\nwant %d and %q", tt.args, code, out, errs, tt.code, tt.want)
		}
		if code == cli.ExitUsage && !strings.Contains(errs, "Usage:") {
			t.Errorf("%q: no usage after the error:\n%s", tt.args, errs)
		}
	}
}

// The PID of a process that is gone, and of one that is not a gompirun.
func TestNotAGompirun(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		pid  int
		want string
	}{
		{dead.Process.Pid, fmt.Sprintf("gompi-migrate: no process with pid %d", dead.Process.Pid)},
		{os.Getpid(), fmt.Sprintf("gompi-migrate: process %d (migrate.test) is not a gompirun", os.Getpid())},
	} {
		code, _, errs := run(strconv.Itoa(tt.pid), "--off", "n1")
		if code != 1 || !strings.HasPrefix(errs, tt.want) {
			t.Errorf("pid %d: status %d, stderr %q, want 1 and %q", tt.pid, code, errs, tt.want)
		}
	}
	// A record left by a gompirun whose PID now runs something else.
	dir := rte.HNPDir(os.Getpid())
	if err := control.PrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Write(dir, jobs.Record{Job: "cafe", PID: os.Getpid(), ProcStart: 1}); err != nil {
		t.Fatal(err)
	}
	if err := jobs.FindHNP(os.Getpid()); !errors.Is(err, jobs.ErrNoJob) || !strings.Contains(err.Error(), "is not a gompirun") {
		t.Errorf("FindHNP of a stale record: %v", err)
	}
}

// toolServer answers Tool.Migrate like a gompirun would: with resp, or
// err, or by waiting until the caller goes away when block is set.
type toolServer struct {
	pb.UnimplementedToolServer
	resp    *pb.MigrateResponse
	err     error
	block   bool
	entered chan struct{}

	mu  sync.Mutex
	got []*pb.MigrateRequest
}

func (s *toolServer) Migrate(ctx context.Context, req *pb.MigrateRequest) (*pb.MigrateResponse, error) {
	s.mu.Lock()
	s.got = append(s.got, req)
	s.mu.Unlock()
	if s.block {
		close(s.entered)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.resp, s.err
}

func (s *toolServer) requests() []*pb.MigrateRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// serve makes this test process look like a gompirun to the tools: a
// job record with its PID, a job secret, and a Tool server on the control
// socket of its directory.
func serve(t *testing.T, srv pb.ToolServer) int {
	t.Helper()
	run := filepath.Join(t.TempDir(), "run")
	t.Setenv("XDG_RUNTIME_DIR", run)
	pid := os.Getpid()
	dir := rte.HNPDir(pid)
	l, err := control.ListenUnix(filepath.Join(dir, rte.ControlSocket))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := control.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	start, err := jobs.ProcStart(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := jobs.WriteSecret(dir, secret); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Write(dir, jobs.Record{Job: "feedf00d", PID: pid, NP: 4, Nodes: []string{"n1", "n2", "n3"}, ProcStart: start}); err != nil {
		t.Fatal(err)
	}
	g := control.NewServer(secret, nil)
	pb.RegisterToolServer(g, srv)
	served := make(chan error, 1)
	go func() { served <- g.Serve(l) }()
	t.Cleanup(func() {
		g.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("serve: %v", err)
		}
	})
	return pid
}

var done = &pb.MigrateResponse{
	Migrated: true,
	Moves:    []*pb.RankMove{{Rank: 3, From: "n2", To: "n3"}, {Rank: 2, From: "n2", To: "n3"}},
	Seq:      4, DurationNano: int64(840 * time.Millisecond), CheckpointNano: int64(310 * time.Millisecond), RestartNano: int64(530 * time.Millisecond),
	Actions: []string{"crmig: moved rank 2 n2 -> n3, rank 3 n2 -> n3 in 0.84 s (checkpoint 0.31 s, restart 0.53 s), sequence 4"},
}

var notMoved = &pb.MigrateResponse{
	Actions: []string{"crmig: failed: no node left for rank 2: the job's nodes are n1 (predicted to fail), n2 (where it runs, predicted to fail)",
		"autor: passed", "errmgr: no policy acted on the prediction; the job runs on"},
}

func TestMigrate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string // after the PID
		resp    *pb.MigrateResponse
		err     error
		want    *pb.MigrateRequest
		code    int
		stdout  string
		stderr  string
		jsonOut *Outcome
	}{
		{name: "off a node", args: []string{"--off", "n2"}, resp: done,
			want: &pb.MigrateRequest{Off: []string{"n2"}},
			stdout: "Rank 2: n2 -> n3\nRank 3: n2 -> n3\n" +
				"Migrated 2 ranks in 0.84 s (checkpoint 0.31 s, restart 0.53 s); migration sequence 4\n"},
		{name: "everything", args: []string{"-r", "5,2", "--ranks", "2,7", "-x", "n1", "--off", "n2,n1", "-t", "n4", "--onto", "n3,n4", "--within", "90s"},
			resp: &pb.MigrateResponse{Migrated: true, Moves: []*pb.RankMove{{Rank: 2, From: "n1", To: "n4"}}, Seq: 1, DurationNano: 1e9},
			want: &pb.MigrateRequest{Ranks: []int32{2, 5, 7}, Off: []string{"n1", "n2"}, Onto: []string{"n4", "n3"}, WithinNano: int64(90 * time.Second)},
			stdout: "Rank 2: n1 -> n4\n" +
				"Migrated 1 rank in 1.00 s (checkpoint 0.00 s, restart 0.00 s); migration sequence 1\n"},
		{name: "verbose", args: []string{"-v", "--ranks", "2,3", "--off", "n2", "--onto", "n3", "--within", "1m"}, resp: done,
			want: &pb.MigrateRequest{Ranks: []int32{2, 3}, Off: []string{"n2"}, Onto: []string{"n3"}, WithinNano: int64(time.Minute)},
			stdout: "Asking gompirun (pid PID) to migrate ranks 2, 3 and every rank of n2 onto n3 (fault expected within 1m0s)\n" +
				"Rank 2: n2 -> n3\nRank 3: n2 -> n3\n" +
				"Migrated 2 ranks in 0.84 s (checkpoint 0.31 s, restart 0.53 s); migration sequence 4\n" +
				"  crmig: moved rank 2 n2 -> n3, rank 3 n2 -> n3 in 0.84 s (checkpoint 0.31 s, restart 0.53 s), sequence 4\n"},
		{name: "json", args: []string{"--json", "-v", "--ranks", "3"}, resp: done,
			want: &pb.MigrateRequest{Ranks: []int32{3}},
			jsonOut: &Outcome{Migrated: true, Moves: []Move{{2, "n2", "n3"}, {3, "n2", "n3"}}, Seq: 4,
				Duration: 840 * time.Millisecond, Checkpoint: 310 * time.Millisecond, Restart: 530 * time.Millisecond, Actions: done.Actions}},
		{name: "not migrated", args: []string{"--off", "n1,n2"}, resp: notMoved, code: 1,
			want: &pb.MigrateRequest{Off: []string{"n1", "n2"}},
			stderr: "gompi-migrate: no rank was migrated; the job runs on as it was\n" +
				"  crmig: failed: no node left for rank 2: the job's nodes are n1 (predicted to fail), n2 (where it runs, predicted to fail)\n" +
				"  autor: passed\n  errmgr: no policy acted on the prediction; the job runs on\n"},
		{name: "not migrated, json", args: []string{"--off", "n1,n2", "--json"}, resp: notMoved, code: 1,
			want:    &pb.MigrateRequest{Off: []string{"n1", "n2"}},
			jsonOut: &Outcome{Moves: []Move{}, Actions: notMoved.Actions, Error: "no rank was migrated; the job runs on as it was"},
			// the error goes to stderr as well, for a person watching
			stderr: "gompi-migrate: no rank was migrated; the job runs on as it was\n" +
				"  crmig: failed: no node left for rank 2: the job's nodes are n1 (predicted to fail), n2 (where it runs, predicted to fail)\n" +
				"  autor: passed\n  errmgr: no policy acted on the prediction; the job runs on\n"},
		{name: "refused with an error", args: []string{"--ranks", "1"},
			resp: &pb.MigrateResponse{Error: "gompirun: checkpoint/restart is off: run the job with -am ft-enable-cr"}, code: 1,
			want:   &pb.MigrateRequest{Ranks: []int32{1}},
			stderr: "gompi-migrate: gompirun: checkpoint/restart is off: run the job with -am ft-enable-cr\n"},
		{name: "call fails", args: []string{"--ranks", "1"}, err: status.Error(codes.FailedPrecondition, "the job is over"), code: 1,
			want:   &pb.MigrateRequest{Ranks: []int32{1}},
			stderr: "gompi-migrate: ask gompirun (pid PID) to migrate: the job is over\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &toolServer{resp: tt.resp, err: tt.err}
			pid := serve(t, srv)
			code, out, errs := run(append([]string{strconv.Itoa(pid)}, tt.args...)...)
			pidStr := strconv.Itoa(pid)
			if code != tt.code {
				t.Errorf("status %d, want %d; stderr:\n%s", code, tt.code, errs)
			}
			if want := strings.ReplaceAll(tt.stderr, "PID", pidStr); errs != want {
				t.Errorf("stderr:\n%s\nwant\n%s", errs, want)
			}
			if tt.jsonOut != nil {
				var got Outcome
				if err := json.Unmarshal([]byte(out), &got); err != nil {
					t.Fatalf("stdout is not JSON: %v\n%s", err, out)
				}
				want := *tt.jsonOut
				want.PID = pid
				if !reflect.DeepEqual(got, want) {
					t.Errorf("JSON %+v, want %+v", got, want)
				}
			} else if want := strings.ReplaceAll(tt.stdout, "PID", pidStr); out != want {
				t.Errorf("stdout:\n%s\nwant\n%s", out, want)
			}
			if got := srv.requests(); len(got) != 1 || !proto.Equal(got[0], tt.want) {
				t.Errorf("requests %v, want one %v", got, tt.want)
			}
		})
	}
}

// Interrupted, the command stops waiting and says where to look.
func TestMigrateInterrupted(t *testing.T) {
	srv := &toolServer{block: true, entered: make(chan struct{})}
	pid := serve(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		code      int
		out, errs string
	}
	res := make(chan result)
	go func() {
		code, out, errs := runCtx(ctx, strconv.Itoa(pid), "--off", "n2")
		res <- result{code, out, errs}
	}()
	<-srv.entered
	cancel()
	r := <-res
	want := fmt.Sprintf("gompi-migrate: interrupted while waiting for gompirun (pid %d) to migrate; the migration goes on: gompi-ps --ranks %d shows where the ranks run\n", pid, pid)
	if r.code != 1 || r.out != "" || r.errs != want {
		t.Errorf("status %d, stdout %q, stderr %q; want 1 and %q", r.code, r.out, r.errs, want)
	}
}

func TestParseRanks(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		err  string
	}{
		{"2", []int{2}, ""},
		{"5,2", []int{2, 5}, ""},
		{" 3 , 0 ,3", []int{0, 3}, ""},
		{"2147483647", []int{2147483647}, ""},
		{"007", []int{7}, ""},
		{"", nil, "no ranks given: write ranks as 2,5"},
		{" ", nil, "no ranks given"},
		{"2,", nil, `empty rank in "2,": write ranks as 2,5`},
		{",2", nil, `empty rank in ",2"`},
		{"2,x", nil, `"x" is not a rank: ranks are numbers from 0, written as 2,5`},
		{"+2", nil, `"+2" is not a rank`},
		{"2 3", nil, `"2 3" is not a rank`},
		{"0x10", nil, `"0x10" is not a rank`},
		{"-", nil, `"-" is not a rank`},
		{"--1", nil, `"--1" is not a rank`},
		{"-1", nil, "rank -1 is negative: ranks count from 0"},
		{"2147483648", nil, "rank 2147483648 is too large: no job has that many ranks"},
		{"99999999999999999999999", nil, "rank 99999999999999999999999 is too large"},
	}
	for _, tt := range tests {
		got, err := ParseRanks(tt.in)
		switch {
		case tt.err == "" && (err != nil || !slices.Equal(got, tt.want)):
			t.Errorf("ParseRanks(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.err)):
			t.Errorf("ParseRanks(%q) = %v, %v; want error %q", tt.in, got, err, tt.err)
		}
	}
}

func TestParseNodes(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{"n1", []string{"n1"}, ""},
		{"n2,n1", []string{"n2", "n1"}, ""},
		{" n1 , node-2.example ,n1", []string{"n1", "node-2.example"}, ""},
		{"", nil, "no nodes given: write node names as n1,n2"},
		{"n1,", nil, `empty node name in "n1,": write node names as n1,n2`},
		{"n1, ,n2", nil, `empty node name in "n1, ,n2"`},
		{"a b", nil, `node name "a b" holds a space or control character`},
		{"a\x00b", nil, `node name "a\x00b" holds a space or control character`},
	}
	for _, tt := range tests {
		got, err := ParseNodes(tt.in)
		switch {
		case tt.err == "" && (err != nil || !slices.Equal(got, tt.want)):
			t.Errorf("ParseNodes(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.err)):
			t.Errorf("ParseNodes(%q) = %q, %v; want error %q", tt.in, got, err, tt.err)
		}
	}
}

// Whatever the input, ParseRanks returns ranks a request can carry,
// ascending and each once, or an error; and reads its own output back.
func FuzzParseRanks(f *testing.F) {
	for _, s := range []string{"2,5", "0", "-1", "2,x", " 3 , 3", "", ",", "2147483648", "+1", "1,-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseRanks(s)
		if err != nil {
			if got != nil {
				t.Fatalf("ParseRanks(%q) = %v with error %v", s, got, err)
			}
			return
		}
		if len(got) == 0 {
			t.Fatalf("ParseRanks(%q) = no ranks, no error", s)
		}
		parts := make([]string, len(got))
		for i, r := range got {
			if r < 0 || r > 1<<31-1 || (i > 0 && r <= got[i-1]) {
				t.Fatalf("ParseRanks(%q) = %v: not ascending ranks that fit a request", s, got)
			}
			parts[i] = strconv.Itoa(r)
		}
		again, err := ParseRanks(strings.Join(parts, ","))
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("ParseRanks(%q) = %v, read back as %v, %v", s, got, again, err)
		}
	})
}

// Whatever the input, ParseNodes returns names without commas, spaces or
// control characters, each once, or an error; and reads its output back.
func FuzzParseNodes(f *testing.F) {
	for _, s := range []string{"n1,n2", "n1", "", ",", "a b", " n1 ,n1", "n\x01", "é,ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseNodes(s)
		if err != nil {
			if got != nil {
				t.Fatalf("ParseNodes(%q) = %q with error %v", s, got, err)
			}
			return
		}
		if len(got) == 0 {
			t.Fatalf("ParseNodes(%q) = no names, no error", s)
		}
		seen := map[string]bool{}
		for _, n := range got {
			if n == "" || strings.ContainsAny(n, ", \t\n\r") || seen[n] {
				t.Fatalf("ParseNodes(%q) = %q: a bad or repeated name %q", s, got, n)
			}
			seen[n] = true
		}
		again, err := ParseNodes(strings.Join(got, ","))
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("ParseNodes(%q) = %q, read back as %q, %v", s, got, again, err)
		}
	})
}
