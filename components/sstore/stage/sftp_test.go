package stage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"gompi/components/filem/sftp"
	"gompi/frameworks"
	"gompi/frameworks/filem"
	"gompi/frameworks/filem/filemtest"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/compress"
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
	for _, alg := range []string{compress.None, compress.Zstd} {
		t.Run(alg, func(t *testing.T) {
			sp := &spy{Module: fm}
			f := newFixture(t, nil, ParamCompress+"="+alg, ParamMaxInflight+"=4")
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
