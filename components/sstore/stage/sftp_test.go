package stage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"gompi/components/filem/sftp"
	"gompi/frameworks"
	"gompi/frameworks/filem"
	"gompi/frameworks/filem/filemtest"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/compress"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// sftpModule selects filem/sftp to reach s with its user key.
func sftpModule(t testing.TB, s *filemtest.SSHD) filem.Module {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	set.FileM.Register(sftp.New())
	vals, err := params.ResolveSettings([]mca.Setting{
		{Name: sftp.ParamIdentity, Value: s.UserKey},
		{Name: sftp.ParamKnownHosts, Value: s.KnownHosts},
		{Name: filem.Name, Value: "sftp"},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.FileM.SelectOne(context.Background(), vals, mca.RoleDaemon, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cl, ok := c.Module.(io.Closer); ok {
		t.Cleanup(func() { cl.Close() })
	}
	return c.Module
}

// TestSFTP drains to a global folder reached over sftp from a real sshd
// (sharing this machine's file system) and fetches back from it.
func TestSFTP(t *testing.T) {
	s := filemtest.StartSSHD(t)
	fm := sftpModule(t, s)
	for _, tc := range []struct {
		alg       string
		groupRead bool
	}{{compress.None, false}, {compress.Zstd, false}, {compress.Zstd, true}} {
		name := tc.alg
		if tc.groupRead {
			name += "-group-readable"
		}
		t.Run(name, func(t *testing.T) {
			alg := tc.alg
			sp := &spy{Module: fm}
			f := newFixture(t, nil, ParamCompress+"="+alg, ParamMaxInflight+"=4", fmt.Sprintf("%s=%t", sstore.ParamGroupReadable, tc.groupRead))
			if err := f.m.Provision(context.Background(), sstore.Host{Node: "n1", FileM: sp}); err != nil {
				t.Fatal(err)
			}
			local := f.ref
			f.ref.Dir = fmt.Sprintf("sftp://root@127.0.0.1:%d%s", s.Port, f.global)
			if !f.ref.IsRemote() {
				t.Fatalf("%s is not remote", f.ref.Dir)
			}
			snaps := []rankFiles{
				{"app.state": compressible(5<<20, 1), "library.state": []byte("lib"), "noise": random(512<<10, 2)},
				manyFiles(8, 3),
			}
			var locals []sstore.Local
			for rank, sn := range snaps {
				locals = append(locals, f.write(t, 2, rank, sn))
			}
			ctx := context.Background()
			if err := f.m.Sync(ctx, f.ref, 2, locals); err != nil {
				t.Fatal(err)
			}
			// The sshd shares the file system: look at what arrived.
			lf := *f
			lf.ref = local
			for rank, sn := range snaps {
				checkGlobal(t, &lf, 2, rank, sn, alg)
			}
			checkMetaLast(t, sp, f.ref, 2, len(snaps))
			// The sequence's folders are made by FileM on the way, the
			// files keep the modes the drain gives them.
			wantDir, wantFile := snapshot.OwnerDirMode, snapshot.OwnerFileMode
			if tc.groupRead {
				wantDir, wantFile = snapshot.GroupDirMode, snapshot.GroupFileMode
			}
			checkModes(t, local.SeqDir(2), wantDir, wantFile)
			// So does the global metadata, into a reference FileM makes.
			mref := snapshot.Ref{Dir: f.ref.Dir + "/new", Name: f.ref.Name}
			ms, err := snapshot.MetaStoreFor(mref, sp, tc.groupRead)
			if err != nil {
				t.Fatal(err)
			}
			if err := ms.WriteGlobal(ctx, mref, &snapshot.GlobalMeta{Job: "4711", Ranks: 2}); err != nil {
				t.Fatal(err)
			}
			checkModes(t, filepath.Join(f.global, "new", mref.Name), wantDir, wantFile)
			if err := f.m.Remove(ctx, f.ref, 2); err != nil {
				t.Fatal(err)
			}
			for rank, sn := range snaps {
				dir, err := f.m.Fetch(ctx, f.ref, 2, rank)
				if err != nil {
					t.Fatal(err)
				}
				sameSnapshot(t, dir, rank, sn)
			}
			if _, _, gets := sp.counts(); gets == 0 {
				t.Errorf("Fetch made no transfer")
			}
			noTemporaries(t, f.nodeDir())

			// A drain failing in the middle removes its files over sftp.
			sp.hook = func(_ context.Context, n int, _ []filem.Transfer) error {
				if n%5 == 0 {
					return errors.New("injected failure")
				}
				return nil
			}
			var seq3 []sstore.Local
			for rank, sn := range snaps {
				seq3 = append(seq3, f.write(t, 3, rank, sn))
			}
			if err := f.m.Sync(ctx, f.ref, 3, seq3); err == nil || !strings.Contains(err.Error(), "injected failure") {
				t.Fatalf("Sync: %v", err)
			}
			if left := tree(t, local.SeqDir(3)); len(left) != 0 {
				t.Errorf("left on global storage: %v", left)
			}
			if len(tree(t, local.SeqDir(2))) == 0 {
				t.Errorf("seq 2 lost")
			}
		})
	}
}

// checkModes fails for each folder under root (root included) whose mode
// is not dir and each file whose mode is not file.
func checkModes(t *testing.T, root string, dir, file fs.FileMode) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := file
		if d.IsDir() {
			want = dir
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", p, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
