package compress

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gompi/frameworks/sstore/snapshot"
)

// heatGrid returns n bytes of a float64 grid like a heat simulation's
// early state: a smooth warm region next to the heated edge, exact zeros
// where the heat has not arrived yet.
func heatGrid(n int) []byte {
	side := int(math.Sqrt(float64(n / 8)))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		x := (i / 8) % side
		y := (i / 8) / side
		var v float64
		if x < side/5 {
			v = 100 * math.Exp(-float64(x)/float64(side/25)) * (1 + 0.1*math.Sin(float64(y)/30))
		}
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
	}
	return b
}

// warmGrid is a grid later in a run: every cell warm, values smooth in
// space but with full mantissas, as real floating-point state is.
func warmGrid(n int) []byte {
	side := int(math.Sqrt(float64(n / 8)))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		x, y := float64((i/8)%side), float64((i/8)/side)
		v := 20 + 80*math.Exp(-x/float64(side)) + math.Sin(x/17)*math.Cos(y/23)
		binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
	}
	return b
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed)})
	r.Read(b)
	return b
}

var samples = []struct {
	name string
	data []byte
}{
	{"empty", nil},
	{"one-byte", []byte{42}},
	{"text", []byte(strings.Repeat("gompi checkpoint ", 5000))},
	// Several blocks of each algorithm (gzip's and s2's are 1 MiB), a
	// short last one; no bigger, as the encoders are slow under -race.
	{"heat-3.5MiB", heatGrid(7 << 19)},
	{"random-1.5MiB", randomBytes(3<<19, 1)},
	{"exact-gzip-blocks", randomBytes(2*gzipBlock, 2)},
}

func TestRoundTrip(t *testing.T) {
	for _, alg := range Algorithms {
		l, err := LevelsOf(alg)
		if err != nil {
			t.Fatal(err)
		}
		for _, level := range []int{0, l.Min, l.Max} {
			for _, s := range samples {
				if level == l.Max && alg == Zstd && len(s.data) > 1<<20 {
					continue // zstd's best level is slow under -race; the small samples cover it
				}
				t.Run(fmt.Sprintf("%s/%d/%s", alg, level, s.name), func(t *testing.T) {
					var c bytes.Buffer
					st, err := Compress(t.Context(), &c, bytes.NewReader(s.data), alg, level)
					if err != nil {
						t.Fatal(err)
					}
					if st.In != int64(len(s.data)) || st.Out != int64(c.Len()) {
						t.Errorf("stats %+v, want in %d out %d", st, len(s.data), c.Len())
					}
					if alg != None && c.Len() == 0 {
						t.Errorf("empty output: an empty input must still give one frame")
					}
					var d bytes.Buffer
					dst, err := Decompress(t.Context(), &d, bytes.NewReader(c.Bytes()), alg)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(d.Bytes(), s.data) {
						t.Fatalf("round trip changed the data (%d bytes back, %d in)", d.Len(), len(s.data))
					}
					if dst.In != int64(c.Len()) || dst.Out != int64(len(s.data)) {
						t.Errorf("decompress stats %+v", dst)
					}
				})
			}
		}
	}
}

func TestCompressesWell(t *testing.T) {
	data := heatGrid(16 << 20)
	for _, alg := range []string{Zstd, S2, Gzip} {
		var c bytes.Buffer
		if _, err := Compress(t.Context(), &c, bytes.NewReader(data), alg, 0); err != nil {
			t.Fatal(err)
		}
		if ratio := float64(len(data)) / float64(c.Len()); ratio < 3 {
			t.Errorf("%s: ratio %.2f on a mostly-zero grid, want at least 3", alg, ratio)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		alg   string
		level int
		ok    bool
	}{
		{None, 0, true}, {None, 1, false},
		{Zstd, 0, true}, {Zstd, 1, true}, {Zstd, 22, true}, {Zstd, 23, false}, {Zstd, -1, false},
		{S2, 3, true}, {S2, 4, false},
		{Gzip, 9, true}, {Gzip, 10, false},
		{"lz4", 0, false}, {"", 0, false},
	} {
		err := Check(tc.alg, tc.level)
		if (err == nil) != tc.ok {
			t.Errorf("Check(%q, %d) = %v, want ok=%v", tc.alg, tc.level, err, tc.ok)
		}
		if !tc.ok {
			if _, cerr := Compress(t.Context(), io.Discard, strings.NewReader("x"), tc.alg, tc.level); cerr == nil {
				t.Errorf("Compress(%q, %d) accepted what Check refuses", tc.alg, tc.level)
			}
		}
	}
	if err := Check("lz4", 0); !strings.Contains(err.Error(), "zstd") {
		t.Errorf("unknown algorithm error %q does not list the choices", err)
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	data := heatGrid(8 << 20)
	for _, alg := range Algorithms {
		_, err := Compress(ctx, io.Discard, bytes.NewReader(data), alg, 0)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s compress with a cancelled context: %v", alg, err)
		}
	}
}

// A writer that fails (a full disk) stops the encoders and is reported.
func TestWriterFails(t *testing.T) {
	data := randomBytes(20<<20, 3)
	for _, alg := range Algorithms {
		w := &failAfter{n: 1 << 20}
		_, err := Compress(t.Context(), w, bytes.NewReader(data), alg, 0)
		if !errors.Is(err, errDiskFull) {
			t.Errorf("%s: %v, want the writer's error", alg, err)
		}
	}
}

var errDiskFull = errors.New("disk full")

type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n := f.n
		f.n = 0
		return n, errDiskFull
	}
	f.n -= len(p)
	return len(p), nil
}

func TestFileRoundTrip(t *testing.T) {
	src := t.TempDir()
	for _, s := range samples {
		if err := os.WriteFile(filepath.Join(src, s.name), s.data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, alg := range Algorithms {
		t.Run(alg, func(t *testing.T) {
			stored, restored := t.TempDir(), t.TempDir()
			for _, s := range samples {
				f, err := CompressFile(t.Context(), filepath.Join(src, s.name), stored, alg, 0)
				if err != nil {
					t.Fatal(err)
				}
				size, sum, _ := snapshot.ChecksumFile(filepath.Join(src, s.name))
				wantStored := s.name + Suffix(alg)
				if f.Name != s.name || f.Size != size || f.Checksum != sum {
					t.Errorf("record %+v, want name %s size %d checksum %s", f, s.name, size, sum)
				}
				if alg == None && (f.Compression != "" || f.Stored != "") || alg != None && (f.Compression != alg || f.Stored != wantStored) {
					t.Errorf("record %+v: wrong compression or stored name for %s", f, alg)
				}
				fi, err := os.Stat(filepath.Join(stored, wantStored))
				if err != nil || fi.Size() != f.StoredSize {
					t.Errorf("stored file: %v, size %v, record says %d", err, fi, f.StoredSize)
				}
				if err := DecompressFile(t.Context(), stored, f.FileRecord, restored); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(filepath.Join(restored, s.name))
				if err != nil || !bytes.Equal(got, s.data) {
					t.Errorf("%s restored differently (%v)", s.name, err)
				}
			}
			// Nothing but the stored files: no temporary names left.
			ents, _ := os.ReadDir(stored)
			if len(ents) != len(samples) {
				t.Errorf("stored directory holds %d entries, want %d", len(ents), len(samples))
			}
		})
	}
}

func TestFileCorruption(t *testing.T) {
	data := heatGrid(7 << 19) // several gzip members, to cut between two
	src := filepath.Join(t.TempDir(), "rank.state")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	damage := []struct {
		name string
		do   func(t *testing.T, path string, f *File)
	}{
		{"byte flipped", func(t *testing.T, path string, f *File) { flip(t, path, f.StoredSize/2) }},
		{"truncated mid-block", func(t *testing.T, path string, f *File) { truncate(t, path, f.StoredSize*2/3) }},
		{"empty", func(t *testing.T, path string, f *File) { truncate(t, path, 0) }},
		{"recorded size wrong", func(t *testing.T, path string, f *File) { f.Size++ }},
		{"recorded checksum wrong", func(t *testing.T, path string, f *File) { f.Checksum = "crc32c:00000000" }},
		{"cut between blocks", func(t *testing.T, path string, f *File) {
			if f.Compression != Gzip {
				f.Size-- // only gzip is written as several members: damage the record instead
				return
			}
			truncate(t, path, firstFrameEnd(t, path, f.Compression))
		}},
	}
	for _, alg := range Algorithms {
		for _, d := range damage {
			t.Run(alg+"/"+d.name, func(t *testing.T) {
				stored, restored := t.TempDir(), t.TempDir()
				f, err := CompressFile(t.Context(), src, stored, alg, 0)
				if err != nil {
					t.Fatal(err)
				}
				storedPath := filepath.Join(stored, f.Name+Suffix(alg))
				if err := Verify(t.Context(), stored, &snapshot.LocalMeta{Files: []snapshot.FileRecord{f.FileRecord}}); err != nil {
					t.Fatalf("Verify before damage: %v", err)
				}
				d.do(t, storedPath, &f)
				if err := VerifyFile(t.Context(), stored, f.FileRecord); !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), storedPath) {
					t.Errorf("VerifyFile: %v, want an error wrapping snapshot.ErrCorrupt naming %s", err, storedPath)
				}
				err = DecompressFile(t.Context(), stored, f.FileRecord, restored)
				if !errors.Is(err, snapshot.ErrCorrupt) {
					t.Fatalf("%v, want an error wrapping snapshot.ErrCorrupt", err)
				}
				if !strings.Contains(err.Error(), storedPath) {
					t.Errorf("error %q does not name %s", err, storedPath)
				}
				if ents, _ := os.ReadDir(restored); len(ents) != 0 {
					t.Errorf("a damaged file left %v in the destination", ents)
				}
			})
		}
	}
	t.Run("missing", func(t *testing.T) {
		err := DecompressFile(t.Context(), t.TempDir(), snapshot.FileRecord{Name: "x", Compression: Zstd, Stored: "x.zst"}, t.TempDir())
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v, want fs.ErrNotExist", err)
		}
	})
	t.Run("bad stored name", func(t *testing.T) {
		err := DecompressFile(t.Context(), t.TempDir(), snapshot.FileRecord{Name: "x", Compression: Zstd, Stored: "../x.zst"}, t.TempDir())
		if !errors.Is(err, snapshot.ErrCorrupt) {
			t.Errorf("%v, want snapshot.ErrCorrupt", err)
		}
	})
}

func flip(t *testing.T, path string, at int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0x5a
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// firstFrameEnd finds where the first gzip member ends, by decoding growing prefixes: the shortest one that decodes
// without error to exactly one block.
func firstFrameEnd(t *testing.T, path, alg string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block := int64(gzipBlock)
	lo, hi := int64(1), int64(len(b))
	for lo < hi { // smallest prefix that yields a whole block
		mid := (lo + hi) / 2
		st, _ := Decompress(context.Background(), io.Discard, bytes.NewReader(b[:mid]), alg)
		if st.Out >= block {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	// The block's bytes come out before its trailer is read: the frame
	// ends at the first longer prefix that decodes cleanly.
	for end := lo; end < lo+32 && end <= int64(len(b)); end++ {
		if _, err := Decompress(context.Background(), io.Discard, bytes.NewReader(b[:end]), alg); err == nil {
			return end
		}
	}
	t.Fatalf("no prefix of %d to %d bytes decodes cleanly", lo, lo+32)
	return 0
}

func FuzzDecompress(f *testing.F) {
	for _, alg := range Algorithms {
		var b bytes.Buffer
		if _, err := Compress(context.Background(), &b, strings.NewReader(strings.Repeat("seed", 300)), alg, 0); err != nil {
			f.Fatal(err)
		}
		for i := range Algorithms {
			f.Add(uint8(i), b.Bytes())
		}
	}
	f.Add(uint8(1), []byte{0x28, 0xb5, 0x2f, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff}) // zstd magic, huge window
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		alg := Algorithms[int(which)%len(Algorithms)]
		st, err := Decompress(context.Background(), io.Discard, bytes.NewReader(data), alg)
		if alg == None && (err != nil || st.Out != int64(len(data))) {
			t.Fatalf("none: %v, %+v", err, st)
		}
		if err == nil && alg != None && len(data) == 0 {
			t.Fatal("empty input decoded without error")
		}
	})
}

// Benchmarks report MB/s of original bytes, and per processor, on 64 MiB.
func BenchmarkCompress(b *testing.B) {
	data := map[string][]byte{"heat": heatGrid(64 << 20), "warm": warmGrid(64 << 20), "random": randomBytes(64<<20, 9)}
	for _, kind := range []string{"heat", "warm", "random"} {
		for _, alg := range Algorithms {
			b.Run(alg+"/"+kind, func(b *testing.B) {
				var out bytes.Buffer
				b.SetBytes(int64(len(data[kind])))
				for b.Loop() {
					out.Reset()
					if _, err := Compress(b.Context(), &out, bytes.NewReader(data[kind]), alg, 0); err != nil {
						b.Fatal(err)
					}
				}
				perCore(b, len(data[kind]))
				b.ReportMetric(float64(len(data[kind]))/float64(out.Len()), "ratio")
			})
			b.Run("decompress-"+alg+"/"+kind, func(b *testing.B) {
				var cb bytes.Buffer
				if _, err := Compress(b.Context(), &cb, bytes.NewReader(data[kind]), alg, 0); err != nil {
					b.Fatal(err)
				}
				c := cb.Bytes()
				b.SetBytes(int64(len(data[kind])))
				for b.Loop() {
					if _, err := Decompress(b.Context(), io.Discard, bytes.NewReader(c), alg); err != nil {
						b.Fatal(err)
					}
				}
				perCore(b, len(data[kind]))
			})
		}
	}
}

func perCore(b *testing.B, n int) {
	mbs := float64(n) * float64(b.N) / b.Elapsed().Seconds() / 1e6
	b.ReportMetric(mbs/float64(runtime.GOMAXPROCS(0)), "MB/s/core")
}
