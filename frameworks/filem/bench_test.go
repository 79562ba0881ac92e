package filem_test

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	filemraw "gompi/components/filem/raw"
	filemrsh "gompi/components/filem/rsh"
	filemsftp "gompi/components/filem/sftp"
	"gompi/frameworks"
	"gompi/frameworks/filem"
	"gompi/frameworks/filem/filemtest"
	"gompi/mca"
)

// BenchmarkPut compares the components on one 256 MiB file put to this
// machine: raw as a local copy, rsh and sftp through a private sshd on
// 127.0.0.1. MB/s/core divides by the processors, which the client, sshd
// and (for ssh) the ciphers share.
func BenchmarkPut(b *testing.B) {
	s := filemtest.StartSSHD(b)
	src := filepath.Join(b.TempDir(), "big")
	data := make([]byte, 256<<20)
	for i := range data {
		data[i] = byte(i*2654435761>>13) ^ byte(i>>17)
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		b.Fatal(err)
	}
	dst := filepath.Join(b.TempDir(), "big")
	for _, tc := range []struct {
		name     string
		comp     mca.Component[filem.Module]
		host     string
		settings []mca.Setting
	}{
		{"raw", filemraw.New(), "", nil},
		{"rsh", filemrsh.New(), s.Host(), []mca.Setting{{Name: filemrsh.ParamArgs, Value: s.SSHArgs()}}},
		{"sftp", filemsftp.New(), s.Host(), []mca.Setting{{Name: filemsftp.ParamIdentity, Value: s.UserKey}, {Name: filemsftp.ParamKnownHosts, Value: s.KnownHosts}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			params := mca.NewParams()
			set := frameworks.New(params)
			set.FileM.Register(tc.comp)
			vals, err := params.ResolveSettings(tc.settings)
			if err != nil {
				b.Fatal(err)
			}
			c, err := set.FileM.SelectOne(b.Context(), vals, mca.RoleDaemon, nil)
			if err != nil {
				b.Fatal(err)
			}
			if cl, ok := c.Module.(io.Closer); ok {
				b.Cleanup(func() { cl.Close() })
			}
			ts := []filem.Transfer{{Local: src, Remote: filem.Remote{Host: tc.host, Path: dst}}}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := c.Module.Put(b.Context(), ts); err != nil {
					b.Fatal(err)
				}
			}
			mbs := float64(len(data)) * float64(b.N) / b.Elapsed().Seconds() / 1e6
			b.ReportMetric(mbs/float64(runtime.GOMAXPROCS(0)), "MB/s/core")
		})
	}
}
