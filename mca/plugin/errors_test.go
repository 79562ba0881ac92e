package plugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"gompi/frameworks/crs"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/filem"
	"gompi/frameworks/plm"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
	pb "gompi/mca/plugin/proto"
)

// describedComponent builds a component description as a plugin would send it.
type describedComponent struct {
	fw, name, param, def string
	typ                  mca.Type
}

func (d *describedComponent) pb() *pb.ComponentDescription {
	c := &pb.ComponentDescription{Framework: d.fw, Name: d.name, Description: "test", Version: "1"}
	if d.param != "" {
		c.Params = append(c.Params, specToPB(mca.ParamSpec{Name: d.param, Type: d.typ, Default: d.def}))
	}
	return c
}

// roundTrip sends err across the bridge's error mapping.
func roundTrip(err error) error {
	got := componentError(toStatus(err))
	if got == nil {
		return toStatus(err)
	}
	return got
}

func TestErrorMapping(t *testing.T) {
	batch := errors.Join(
		&filem.TransferError{Op: "put", Src: "/a", Dst: "n1:/b", Err: &fs.PathError{Op: "open", Path: "/a", Err: fs.ErrNotExist}},
		&filem.TransferError{Op: "put", Src: "/c", Dst: "n2:/d", Err: fmt.Errorf("filem/raw: %w", filem.ErrUnreachable)},
	)
	all := []error{crs.ErrNotCheckpointable, crs.ErrNoProcess, crs.ErrNoSnapshot, filem.ErrUnreachable,
		fs.ErrNotExist, mca.ErrSkip, context.Canceled, context.DeadlineExceeded, sstore.ErrDisabled, snapshot.ErrCorrupt,
		errmgr.ErrJobOver, errmgr.ErrNoCheckpoint, errmgr.ErrMigrationAbandoned, plm.ErrLaunch, snapc.ErrDisabled,
		snapc.ErrNotCoordinator, snapc.ErrRefused, snapc.ErrFailed, snapc.ErrNoApp}
	for _, tc := range []struct {
		name  string
		err   error
		is    []error
		code  codes.Code
		trans int
	}{
		{"not checkpointable", fmt.Errorf("crs/none: checkpoint pid 4: %w: select crs=self", crs.ErrNotCheckpointable),
			[]error{crs.ErrNotCheckpointable}, codes.FailedPrecondition, 0},
		{"no process", fmt.Errorf("crs/x: %w: pid 9 has exited", crs.ErrNoProcess), []error{crs.ErrNoProcess}, codes.NotFound, 0},
		{"no snapshot", fmt.Errorf("crs/x: %w", crs.ErrNoSnapshot), []error{crs.ErrNoSnapshot}, codes.NotFound, 0},
		{"unreachable", fmt.Errorf("filem/raw: %w", filem.ErrUnreachable), []error{filem.ErrUnreachable}, codes.Unavailable, 0},
		{"not exist", &fs.PathError{Op: "stat", Path: "/x", Err: os.ErrNotExist}, []error{fs.ErrNotExist}, codes.NotFound, 0},
		{"skip", fmt.Errorf("crs/criu: criu not installed: %w", mca.ErrSkip), []error{mca.ErrSkip}, codes.FailedPrecondition, 0},
		{"canceled", fmt.Errorf("copy: %w", context.Canceled), []error{context.Canceled}, codes.Canceled, 0},
		{"deadline", fmt.Errorf("copy: %w", context.DeadlineExceeded), []error{context.DeadlineExceeded}, codes.DeadlineExceeded, 0},
		{"plain", errors.New("disk on fire"), nil, codes.Unknown, 0},
		{"disabled", fmt.Errorf("sstore/none: sync: %w", sstore.ErrDisabled), []error{sstore.ErrDisabled}, codes.FailedPrecondition, 0},
		{"corrupt", fmt.Errorf("verify rank 2: %w", snapshot.ErrCorrupt), []error{snapshot.ErrCorrupt}, codes.DataLoss, 0},
		{"job over", fmt.Errorf("notify: %w", errmgr.ErrJobOver), []error{errmgr.ErrJobOver}, codes.FailedPrecondition, 0},
		{"no checkpoint", fmt.Errorf("recover: %w", errmgr.ErrNoCheckpoint), []error{errmgr.ErrNoCheckpoint}, codes.FailedPrecondition, 0},
		{"migration abandoned", fmt.Errorf("migrate: %w", errmgr.ErrMigrationAbandoned), []error{errmgr.ErrMigrationAbandoned}, codes.Aborted, 0},
		{"launch", fmt.Errorf("plm/ssh: node n2: %w: ssh not found", plm.ErrLaunch), []error{plm.ErrLaunch}, codes.Unknown, 0},
		{"snapc disabled", fmt.Errorf("snapc/none: %w", snapc.ErrDisabled), []error{snapc.ErrDisabled}, codes.FailedPrecondition, 0},
		{"not coordinator", fmt.Errorf("snapc/full: %w", snapc.ErrNotCoordinator), []error{snapc.ErrNotCoordinator}, codes.FailedPrecondition, 0},
		{"refused", fmt.Errorf("%w: rank 2: finalizing", snapc.ErrRefused), []error{snapc.ErrRefused}, codes.FailedPrecondition, 0},
		{"failed", fmt.Errorf("%w: node n2 lost", snapc.ErrFailed), []error{snapc.ErrFailed}, codes.Aborted, 0},
		{"no app", fmt.Errorf("rank 3: %w", snapc.ErrNoApp), []error{snapc.ErrNoApp}, codes.Unavailable, 0},
		{"batch", batch, []error{fs.ErrNotExist, filem.ErrUnreachable}, codes.Unavailable, 2},
		{"wrapped batch", fmt.Errorf("sstore: drain: %w", batch), []error{fs.ErrNotExist, filem.ErrUnreachable}, codes.Unavailable, 2},
		{"invalid utf-8", fmt.Errorf("open \xff\xfe: %w", fs.ErrNotExist), []error{fs.ErrNotExist}, codes.NotFound, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := toStatus(tc.err)
			if c := status.Code(st); c != tc.code {
				t.Errorf("code %v, want %v", c, tc.code)
			}
			got := roundTrip(tc.err)
			if got.Error() != tc.err.Error() {
				t.Errorf("text %q, want %q", got.Error(), tc.err.Error())
			}
			for _, s := range all {
				want := contains2(tc.is, s)
				if errors.Is(got, s) != want {
					t.Errorf("errors.Is(%v) = %v, want %v", s, !want, want)
				}
			}
			tes := transferErrors(got)
			if len(tes) != tc.trans {
				t.Fatalf("%d transfer errors, want %d", len(tes), tc.trans)
			}
			want := transferErrors(tc.err)
			for i, te := range tes {
				if te.Op != want[i].Op || te.Src != want[i].Src || te.Dst != want[i].Dst || te.Error() != want[i].Error() {
					t.Errorf("transfer error %d: %+v, want %+v", i, te, want[i])
				}
				for _, s := range all {
					if errors.Is(te, s) != errors.Is(want[i], s) {
						t.Errorf("transfer error %d: errors.Is(%v) differs", i, s)
					}
				}
			}
			var te *filem.TransferError
			if tc.trans > 0 && (!errors.As(got, &te) || te.Src != "/a") {
				t.Errorf("errors.As found %+v, want the first transfer error", te)
			}
		})
	}
	if toStatus(nil) != nil {
		t.Error("toStatus(nil) is not nil")
	}
}

// TestExitErrorCrosses: a daemon's plm.ExitError comes back as one, with
// its fields, and still matches plm.ErrLaunch.
func TestExitErrorCrosses(t *testing.T) {
	for _, in := range []*plm.ExitError{
		{Node: "n1", What: "gompid", PID: 42, Code: 3, Said: "refusing to start"},
		{Node: "n2", What: "ssh", PID: 43, Code: -1, Signal: syscall.SIGKILL},
		{Node: "n3", What: "gompid", PID: 44, Code: -1, Err: errors.New("wait: no child")},
	} {
		got := roundTrip(fmt.Errorf("wait: %w", in))
		var ee *plm.ExitError
		if !errors.As(got, &ee) {
			t.Fatalf("%v: errors.As found no plm.ExitError in %#v", in, got)
		}
		if ee.Node != in.Node || ee.What != in.What || ee.PID != in.PID || ee.Code != in.Code || ee.Signal != in.Signal ||
			ee.Said != in.Said || ee.Error() != in.Error() || (ee.Err == nil) != (in.Err == nil) {
			t.Errorf("ExitError %+v came back as %+v", in, ee)
		}
		if !errors.Is(got, plm.ErrLaunch) || got.Error() != "wait: "+in.Error() {
			t.Errorf("%q: want the same text and plm.ErrLaunch", got)
		}
	}
}

func contains2(list []error, e error) bool {
	for _, x := range list {
		if x == e {
			return true
		}
	}
	return false
}

func TestTransportErrorsAreNotComponentErrors(t *testing.T) {
	for _, err := range []error{
		status.Error(codes.Unavailable, "connection refused"),
		status.Error(codes.NotFound, "crs/x: no snapshot"),
		errors.New("not a status"),
	} {
		if ce := componentError(err); ce != nil {
			t.Errorf("componentError(%v) = %v, want nil", err, ce)
		}
	}
}

// FuzzComponentError feeds arbitrary statuses, as a broken or hostile
// plugin might send them, to the mapping back to Go errors.
func FuzzComponentError(f *testing.F) {
	for _, err := range []error{
		fmt.Errorf("x: %w", crs.ErrNoProcess),
		errors.Join(&filem.TransferError{Op: "get", Src: "a", Err: fs.ErrNotExist}),
		errors.New("plain"),
	} {
		st, _ := status.FromError(toStatus(err))
		b, _ := proto.Marshal(st.Proto())
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var sp spb.Status
		if proto.Unmarshal(data, &sp) != nil {
			return
		}
		err := componentError(status.ErrorProto(&sp))
		if err == nil {
			return
		}
		var d *pb.ErrorDetail
		for _, x := range status.FromProto(&sp).Details() {
			if ed, ok := x.(*pb.ErrorDetail); ok {
				d = ed
				break
			}
		}
		if d == nil {
			t.Fatalf("component error %v without a detail", err)
		}
		if err.Error() != string(d.GetMessage()) {
			t.Fatalf("text %q, want %q", err.Error(), d.GetMessage())
		}
		for _, id := range d.GetSentinels() {
			for _, s := range sentinels {
				if s.id == id && !errors.Is(err, s.err) {
					t.Fatalf("sentinel %v lost", id)
				}
			}
		}
		if n := len(transferErrors(err)); n != len(d.GetTransfers()) {
			t.Fatalf("%d transfer errors, detail has %d", n, len(d.GetTransfers()))
		}
	})
}

// FuzzErrorRoundTrip checks that any text and any set of sentinels survive
// the bridge.
func FuzzErrorRoundTrip(f *testing.F) {
	f.Add("crs/none: checkpoint: refused", uint16(1), "/src", "")
	f.Add("\xff", uint16(0xff), "a\x00b", "n:/x")
	f.Fuzz(func(t *testing.T, msg string, mask uint16, src, dst string) {
		var wraps []error
		for i, s := range sentinels {
			if mask&(1<<i) != 0 {
				wraps = append(wraps, s.err)
			}
		}
		var err error = &remoteError{msg: msg, wraps: wraps}
		if mask&0x8000 != 0 {
			err = errors.Join(&filem.TransferError{Op: "put", Src: src, Dst: dst, Err: err})
		}
		got := componentError(toStatus(err))
		if got == nil {
			t.Fatal("component error lost")
		}
		if got.Error() != err.Error() {
			t.Fatalf("text %q, want %q", got.Error(), err.Error())
		}
		for _, s := range sentinels {
			if errors.Is(got, s.err) != errors.Is(err, s.err) {
				t.Fatalf("errors.Is(%v) = %v after the round trip", s.err, !errors.Is(err, s.err))
			}
		}
		if tes := transferErrors(got); mask&0x8000 != 0 && (len(tes) != 1 || tes[0].Src != src || tes[0].Dst != dst) {
			t.Fatalf("transfer errors %v, want one %s -> %s", tes, src, dst)
		}
	})
}

func TestParseChecksums(t *testing.T) {
	sum := strings.Repeat("0f", 32)
	for _, tc := range []struct {
		in   string
		want int
		err  string
	}{
		{"", 0, ""},
		{"gompi-plugin-a=sha256:" + sum, 1, ""},
		{" gompi-plugin-a = SHA256:" + strings.ToUpper(sum) + " , b=sha256:" + sum, 2, ""},
		{"a=sha256:" + sum + ",a=sha256:" + sum, 0, "pinned twice"},
		{"a", 0, "write <file name>"},
		{"=sha256:" + sum, 0, "write <file name>"},
		{"dir/a=sha256:" + sum, 0, "without directories"},
		{"a=md5:" + sum, 0, "only sha256"},
		{"a=" + sum, 0, "only sha256"},
		{"a=sha256:abc", 0, "64 hexadecimal"},
		{"a=sha256:" + strings.Repeat("zz", 32), 0, "64 hexadecimal"},
	} {
		got, err := ParseChecksums(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseChecksums(%q) error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || len(got) != tc.want):
			t.Errorf("ParseChecksums(%q) = %d entries, %v; want %d", tc.in, len(got), err, tc.want)
		}
	}
}

func FuzzParseChecksums(f *testing.F) {
	f.Add("gompi-plugin-a=sha256:" + strings.Repeat("0f", 32))
	f.Add("a=sha256:,b")
	f.Add("../x=sha256:" + strings.Repeat("aa", 32))
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseChecksums(in)
		if err != nil {
			return
		}
		var entries []string
		for name, sum := range got {
			if len(sum) != 32 || name == "" || strings.ContainsAny(name, "/,=") {
				t.Fatalf("accepted entry %q with a %d-byte sum", name, len(sum))
			}
			entries = append(entries, fmt.Sprintf("%s=sha256:%x", name, sum))
		}
		again, err := ParseChecksums(strings.Join(entries, ","))
		if err != nil || len(again) != len(got) {
			t.Fatalf("re-parsing %v: %v", entries, err)
		}
	})
}

func TestConfigFrom(t *testing.T) {
	sum := strings.Repeat("0f", 32)
	for _, tc := range []struct {
		name     string
		settings []mca.Setting
		want     func(Config) bool
		err      string
	}{
		{"defaults", nil, func(c Config) bool {
			return c.Timeout == DefaultTimeout && c.ShowLoadErrors && !c.RequireChecksum && len(c.Dirs) > 0 && len(c.Checksums) == 0
		}, ""},
		{"all set", []mca.Setting{
			{Name: ParamPath, Value: "/a: /b ::/c", Origin: mca.Origin{Source: mca.SourceEnv}},
			{Name: ParamTimeout, Value: "1.5", Origin: mca.Origin{Source: mca.SourceEnv}},
			{Name: ParamRequireChecksum, Value: "on", Origin: mca.Origin{Source: mca.SourceEnv}},
			{Name: ParamShowLoadErrors, Value: "0", Origin: mca.Origin{Source: mca.SourceEnv}},
			{Name: ParamChecksums, Value: "gompi-plugin-x=sha256:" + sum, Origin: mca.Origin{Source: mca.SourceEnv}},
		}, func(c Config) bool {
			return strings.Join(c.Dirs, "|") == "/a|/b|/c" && c.Timeout == 1500*time.Millisecond && c.RequireChecksum &&
				!c.ShowLoadErrors && len(c.Checksums["gompi-plugin-x"]) == 32
		}, ""},
		{"default origin ignored", []mca.Setting{{Name: ParamTimeout, Value: "bogus"}}, func(c Config) bool { return c.Timeout == DefaultTimeout }, ""},
		{"bad timeout", []mca.Setting{{Name: ParamTimeout, Value: "soon", Origin: mca.Origin{Source: mca.SourceCommandLine}}}, nil, ParamTimeout},
		{"bad bool", []mca.Setting{{Name: ParamRequireChecksum, Value: "maybe", Origin: mca.Origin{Source: mca.SourceEnv}}}, nil, ParamRequireChecksum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ConfigFrom(SettingsLookup(tc.settings))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil || !tc.want(c) {
				t.Fatalf("config %+v, %v", c, err)
			}
		})
	}
}
