package mpi_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"gompi/mca"
	"gompi/mpi"
	"gompi/mpi/mpibench"
	"gompi/mpi/mpitest"
)

// BenchmarkProcesses runs the ping-pong and streaming benchmarks between two
// processes, each rank with a Go runtime of its own as in a real job (the
// in-process benchmarks share one runtime between the ranks). The timing
// is the ranks' own; ns/op is one round trip (ping-pong) or one message
// (stream), lat-us is one way.
func BenchmarkProcesses(b *testing.B) {
	cases := []struct {
		kind string
		size int
	}{{"pingpong", 8}, {"pingpong", 1 << 20}, {"stream", 1 << 20}}
	for _, btl := range transports {
		for _, c := range cases {
			for _, procs := range []string{"", "1"} {
				name := fmt.Sprintf("%s/%s/%dB", btl, c.kind, c.size)
				var env []string
				if procs != "" {
					name += "/GOMAXPROCS=" + procs
					env = append(env, "GOMAXPROCS="+procs)
				}
				b.Run(name, func(b *testing.B) {
					env := append(env, fmt.Sprintf("GOMPI_BENCH=%s,%d,%d", c.kind, c.size, b.N))
					outs, err := mpitest.Spawn(context.Background(), mpitest.SpawnConfig{
						N: 2, Rank: "bench", Env: env,
						Settings: []mca.Setting{{Name: "btl", Value: btl}},
					})
					if err != nil {
						b.Fatal(err)
					}
					if len(outs[0]) != 1 {
						b.Fatalf("rank 0 reported %q", outs[0])
					}
					ns, err := strconv.ParseFloat(outs[0][0], 64)
					if err != nil {
						b.Fatal(err)
					}
					per := ns / float64(b.N)
					b.ReportMetric(per, "ns/op")
					if c.kind == "pingpong" {
						b.ReportMetric(per/2/1e3, "lat-us")
						b.ReportMetric(float64(2*c.size)/per*1e3, "MB/s")
					} else {
						b.ReportMetric(float64(c.size)/per*1e3, "MB/s")
					}
				})
			}
		}
	}
}

// rankBench is one rank of a job BenchmarkProcesses spawns.
func rankBench(boot mpi.Bootstrap) error {
	f := strings.Split(os.Getenv("GOMPI_BENCH"), ",")
	if len(f) != 3 {
		return fmt.Errorf("GOMPI_BENCH=%q", os.Getenv("GOMPI_BENCH"))
	}
	size, _ := strconv.Atoi(f[1])
	iters, _ := strconv.Atoi(f[2])
	p, err := mpi.InitWith(context.Background(), boot)
	if err != nil {
		return err
	}
	w := p.World()
	var elapsed time.Duration
	switch f[0] {
	case "pingpong":
		elapsed, err = mpibench.PingPong(w, size, 100, iters)
	case "stream":
		elapsed, err = mpibench.Stream(w, size, 16, 16, iters)
	}
	if err != nil {
		return err
	}
	if w.Rank() == 0 {
		mpitest.Report("%d", elapsed.Nanoseconds())
	}
	return p.Finalize()
}

// TestSpawnedJob runs a job of three separate processes: each rank passes
// a token around the ring and joins an Allreduce.
func TestSpawnedJob(t *testing.T) {
	for _, btl := range transports {
		outs, err := mpitest.Spawn(context.Background(), mpitest.SpawnConfig{
			N: 3, Rank: "ring", Settings: []mca.Setting{{Name: "btl", Value: btl}},
		})
		if err != nil {
			t.Fatalf("%s: %v", btl, err)
		}
		for r, out := range outs {
			if want := fmt.Sprintf("rank %d: token 3, sum 3", r); len(out) != 1 || out[0] != want {
				t.Errorf("%s: rank %d reported %q, want %q", btl, r, out, want)
			}
		}
	}
}

// rankRing is a rank of TestSpawnedJob.
func rankRing(boot mpi.Bootstrap) error {
	p, err := mpi.InitWith(context.Background(), boot)
	if err != nil {
		return err
	}
	w := p.World()
	n, r := w.Size(), w.Rank()
	tok := []int32{0}
	if r == 0 {
		tok[0] = 1
		if err := mpi.SendT(w, tok, 1, 0); err != nil {
			return err
		}
		if _, err := mpi.RecvT(w, tok, n-1, 0); err != nil {
			return err
		}
	} else {
		if _, err := mpi.RecvT(w, tok, r-1, 0); err != nil {
			return err
		}
		tok[0]++
		if err := mpi.SendT(w, tok, (r+1)%n, 0); err != nil {
			return err
		}
	}
	if err := mpi.BcastT(w, tok, 0); err != nil {
		return err
	}
	sum := []int64{1}
	if err := mpi.Allreduce(w, sum, sum, mpi.Sum); err != nil {
		return err
	}
	mpitest.Report("rank %d: token %d, sum %d", r, tok[0], sum[0])
	return p.Finalize()
}

// spawnedRanks are the rank bodies Spawn can start in this test binary.
var spawnedRanks = map[string]mpitest.RankFunc{"bench": rankBench, "ring": rankRing, "agreekill": rankAgreeKill, "ulfmfig": rankULFMFigures}

func TestMain(m *testing.M) {
	if code, ok := mpitest.RunChild(spawnedRanks); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
