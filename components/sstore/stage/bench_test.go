package stage

import (
	"context"
	"fmt"
	"testing"

	"gompi/frameworks/filem/filemtest"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/compress"
)

// BenchmarkDrain times Sync of one rank's 64 MiB snapshot file to a
// global folder on this machine (filem/raw), per algorithm, on state that
// compresses well and on random state. MB/s is of snapshot bytes; the
// stored/orig metric is the fraction written to global storage.
func BenchmarkDrain(b *testing.B) { benchDrain(b, nil) }

// BenchmarkDrainSFTP is BenchmarkDrain with the global folder reached
// through filem/sftp and a real sshd on 127.0.0.1.
func BenchmarkDrainSFTP(b *testing.B) {
	s := filemtest.StartSSHD(b)
	fm := sftpModule(b, s)
	benchDrain(b, func(f *fixture) {
		if err := f.m.Provision(context.Background(), sstore.Host{Node: f.node, FileM: fm}); err != nil {
			b.Fatal(err)
		}
		f.ref.Dir = fmt.Sprintf("sftp://root@127.0.0.1:%d%s", s.Port, f.global)
	})
}

func benchDrain(b *testing.B, setup func(*fixture)) {
	const size = 64 << 20
	data := map[string][]byte{"compressible": compressible(size, 1), "random": random(size, 1)}
	for _, alg := range []string{compress.None, compress.Zstd, compress.S2} {
		for _, kind := range []string{"compressible", "random"} {
			b.Run(alg+"/"+kind, func(b *testing.B) {
				f := newFixture(b, nil, ParamCompress+"="+alg)
				if setup != nil {
					setup(f)
				}
				l := f.write(b, 0, 0, rankFiles{"state": data[kind]})
				var stored int64
				ctx := sstore.WithProgress(context.Background(), func(p sstore.Progress) { stored = p.Stored })
				b.SetBytes(size)
				b.ResetTimer()
				for b.Loop() {
					if err := f.m.Sync(ctx, f.ref, 0, []sstore.Local{l}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(stored)/size, "stored/orig")
			})
		}
	}
}

// BenchmarkDrainFloat times Sync of one rank's 64 MiB snapshot file, a
// smooth float64 field (examples/field's kind of state) or random bytes
// (examples/noop's), stored as is, with zstd (fastest) or s2 without a
// filter, and with the filter chosen by sampling (auto): on random state
// auto must cost next to nothing over storing as is.
func BenchmarkDrainFloat(b *testing.B) {
	const size = 64 << 20
	data := map[string][]byte{"field": smoothField(size), "random": random(size, 1)}
	for _, kind := range []string{"field", "random"} {
		for _, cfg := range []struct{ name, alg, level, shuffle string }{
			{"none", compress.None, "0", compress.ShuffleOff},
			{"zstd1-off", compress.Zstd, "1", compress.ShuffleOff},
			{"zstd1-auto", compress.Zstd, "1", compress.ShuffleAuto},
			{"s2-off", compress.S2, "1", compress.ShuffleOff},
			{"s2-auto", compress.S2, "1", compress.ShuffleAuto},
		} {
			b.Run(kind+"/"+cfg.name, func(b *testing.B) {
				f := newFixture(b, nil, ParamCompress+"="+cfg.alg, ParamCompressLevel+"="+cfg.level, ParamShuffle+"="+cfg.shuffle)
				l := f.write(b, 0, 0, rankFiles{"state": data[kind]})
				var stored int64
				ctx := sstore.WithProgress(context.Background(), func(p sstore.Progress) { stored = p.Stored })
				b.SetBytes(size)
				b.ResetTimer()
				for b.Loop() {
					if err := f.m.Sync(ctx, f.ref, 0, []sstore.Local{l}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(size)/float64(stored), "ratio")
			})
		}
	}
}
