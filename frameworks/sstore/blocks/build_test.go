package blocks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gompi/frameworks/sstore/snapshot"
)

// rawEncoder stores blocks as they are; xorEncoder "compresses" by XOR
// with 0x5a, so that a test sees encoded bytes differ from the block's.
func rawEncoder(dst io.Writer, b []byte) (string, string, error) {
	_, err := dst.Write(b)
	return None, "", err
}

func xorEncoder(dst io.Writer, b []byte) (string, string, error) {
	c := bytes.Clone(b)
	for i := range c {
		c[i] ^= 0x5a
	}
	_, err := dst.Write(c)
	return "xor", "", err
}

func decoder(_ context.Context, dst io.Writer, src io.Reader, enc, _ string) error {
	b, err := io.ReadAll(src)
	if err != nil {
		return err
	}
	switch enc {
	case None:
	case "xor":
		for i := range b {
			b[i] ^= 0x5a
		}
	default:
		return fmt.Errorf("unknown encoding %q", enc)
	}
	_, err = dst.Write(b)
	return err
}

// store is a reference on disk for one rank: Build writes sequence seq's
// pack and manifest where DirOpener finds them.
type store struct {
	root string
	enc  Encoder
}

func (s store) rankDir(seq int) string {
	return filepath.Join(s.root, strconv.Itoa(seq), "gompi_snapshot_0.ckpt")
}

// put stores data as sequence seq against prev and returns its manifest,
// its record and Build's stats.
func (s store) put(t *testing.T, data []byte, prev *Manifest, seq, bs int) (*Manifest, snapshot.FileRecord, Stats) {
	t.Helper()
	dir := s.rankDir(seq)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var pack bytes.Buffer
	m, st, err := Build(context.Background(), bytes.NewReader(data), prev, seq, bs, &pack, "f.pack", s.enc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f.pack"), pack.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	crc := snapshot.NewChecksum()
	crc.Write(data)
	rec := snapshot.FileRecord{Name: "f", Size: int64(len(data)), Checksum: snapshot.FormatChecksum(crc.Sum32()), Blocks: "f.blocks", From: snapshot.JoinSeqs(m.Referenced())}
	if st.Size != rec.Size || st.Checksum != rec.Checksum || st.Stored != int64(pack.Len()) {
		t.Fatalf("stats %+v for %d bytes %s, pack %d", st, rec.Size, rec.Checksum, pack.Len())
	}
	var mb bytes.Buffer
	m.Encode(&mb)
	if err := os.WriteFile(filepath.Join(dir, "f.blocks"), mb.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return m, rec, st
}

// get reassembles sequence seq's file through its manifest on disk.
func (s store) get(seq int, rec snapshot.FileRecord) ([]byte, error) {
	m, err := ReadManifest(filepath.Join(s.rankDir(seq), rec.Blocks), seq)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	err = Reassemble(context.Background(), m, rec, DirOpener(s.rankDir(seq)), decoder, &out)
	return out.Bytes(), err
}

func TestBuildReassemble(t *testing.T) {
	const bs = MinBlockSize
	rnd := func(n int, seed uint64) []byte {
		b := make([]byte, n)
		r := rand.New(rand.NewPCG(seed, 1))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	base := rnd(10*bs+123, 1)
	touch := func(b []byte, at ...int) []byte {
		c := bytes.Clone(b)
		for _, i := range at {
			c[i] ^= 0xff
		}
		return c
	}
	tests := []struct {
		name    string
		prev    []byte // nil: a full checkpoint
		next    []byte
		changed int
		chain   int
	}{
		{"full", nil, base, 11, 0},
		{"unchanged", base, base, 0, 1},
		{"one block", base, touch(base, 3*bs+7), 1, 1},
		{"first and tail", base, touch(base, 0, 10*bs+5), 2, 1},
		{"every block", base, rnd(len(base), 2), 11, 0},
		{"grown", base, append(bytes.Clone(base), rnd(2*bs, 3)...), 3, 1}, // the old tail block and two new ones
		{"shrunk to a block boundary", base, base[:4*bs], 0, 1},
		{"shrunk inside a block", base, base[:4*bs+9], 1, 1},
		{"empty", nil, nil, 0, 0},
		{"from empty", []byte{}, base, 11, 0},
		{"exactly one block", nil, base[:bs], 1, 0},
	}
	for _, enc := range []struct {
		name string
		e    Encoder
	}{{"raw", rawEncoder}, {"xor", xorEncoder}} {
		for _, tt := range tests {
			t.Run(enc.name+"/"+tt.name, func(t *testing.T) {
				s := store{root: t.TempDir(), enc: enc.e}
				var prev *Manifest
				if tt.prev != nil {
					prev, _, _ = s.put(t, tt.prev, nil, 2, bs)
				}
				m, rec, st := s.put(t, tt.next, prev, 3, bs)
				if st.Changed != tt.changed || m.Chain != tt.chain || st.Blocks != int(NumBlocks(int64(len(tt.next)), bs)) {
					t.Errorf("changed %d of %d blocks, chain %d; want %d changed, chain %d", st.Changed, st.Blocks, m.Chain, tt.changed, tt.chain)
				}
				if got, err := s.get(3, rec); err != nil || !bytes.Equal(got, tt.next) {
					t.Errorf("reassembled %d bytes (want %d): %v", len(got), len(tt.next), err)
				}
			})
		}
	}
}

// A chain of sequences: each reassembles, references reach back only to
// the last full one, and fullEvery bounds the chain.
func TestChain(t *testing.T) {
	const bs, fullEvery = MinBlockSize, 3
	s := store{root: t.TempDir(), enc: xorEncoder}
	data := bytes.Repeat([]byte("0123456789abcdef"), 8*bs/16)
	var prev *Manifest
	var recs []snapshot.FileRecord
	var datas [][]byte
	for seq := range 7 {
		data = bytes.Clone(data)
		data[seq*bs] = byte(seq) // one block changes each time
		if !prev.Base(bs, fullEvery) {
			prev = nil
		}
		m, rec, st := s.put(t, data, prev, seq, bs)
		if want := seq % fullEvery; m.Chain != want {
			t.Errorf("seq %d: chain %d, want %d", seq, m.Chain, want)
		}
		if full := m.Chain == 0; full != (st.Changed == 8) || (!full && st.Changed != 1) {
			t.Errorf("seq %d: %d blocks stored", seq, st.Changed)
		}
		for _, r := range m.Referenced() {
			if r < seq-seq%fullEvery {
				t.Errorf("seq %d references seq %d, before its full checkpoint", seq, r)
			}
		}
		prev = m
		recs, datas = append(recs, rec), append(datas, data)
	}
	for seq, rec := range recs {
		if got, err := s.get(seq, rec); err != nil || !bytes.Equal(got, datas[seq]) {
			t.Errorf("seq %d: %v", seq, err)
		}
	}
}

// Damage is named: the sequence whose pack holds the block, the file and
// the block's index; nothing reassembles from it.
func TestDamage(t *testing.T) {
	const bs = MinBlockSize
	data := bytes.Repeat([]byte{7}, 4*bs)
	next := bytes.Clone(data)
	next[2*bs] = 8
	tests := []struct {
		name   string
		damage func(s store)
		want   string
	}{
		{"flipped byte in an older pack", func(s store) { flip(s.rankDir(1), "f.pack", bs+5) }, "sequence 1, file f, block 1: snapshot is damaged: its SHA-256"},
		{"flipped byte in its own pack", func(s store) { flip(s.rankDir(2), "f.pack", 3) }, "sequence 2, file f, block 2"},
		{"truncated older pack", func(s store) { os.Truncate(filepath.Join(s.rankDir(1), "f.pack"), bs+1) }, "sequence 1, file f, block 1"},
		{"older pack gone", func(s store) { os.Remove(filepath.Join(s.rankDir(1), "f.pack")) }, "sequence 1, file f, block 0: pack f.pack"},
		{"older sequence gone", func(s store) { os.RemoveAll(filepath.Join(s.root, "1")) }, "sequence 1, file f, block 0: pack f.pack: sequence 1 does not exist in the reference"},
		{"older rank folder gone", func(s store) { os.RemoveAll(s.rankDir(1)) }, "gompi_snapshot_0.ckpt in sequence 1 does not exist"},
		{"older pack a link out of the tree", func(s store) {
			p := filepath.Join(s.rankDir(1), "f.pack")
			os.Rename(p, p+".x")
			os.Symlink(p+".x", p)
		}, "is a symbolic link"},
		{"older rank folder a link", func(s store) {
			d := s.rankDir(1)
			os.Rename(d, d+".x")
			os.Symlink(d+".x", d)
		}, "not a folder (a symbolic link?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := store{root: t.TempDir(), enc: rawEncoder}
			m, _, _ := s.put(t, data, nil, 1, bs)
			_, rec, _ := s.put(t, next, m, 2, bs)
			tt.damage(s)
			got, err := s.get(2, rec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("reassembly of damaged blocks: %v; want %q", err, tt.want)
			}
			var be *BlockError
			if !errors.As(err, &be) && !strings.Contains(tt.name, "link") {
				t.Errorf("not a BlockError: %v", err)
			}
			if len(got) > 2*bs {
				t.Errorf("%d bytes written past the damage", len(got))
			}
		})
	}
	// A record that does not match its manifest.
	s := store{root: t.TempDir(), enc: rawEncoder}
	m, _, _ := s.put(t, data, nil, 1, bs)
	_, rec, _ := s.put(t, next, m, 2, bs)
	for _, bad := range []func(r *snapshot.FileRecord){
		func(r *snapshot.FileRecord) { r.From = "" }, // a reference retention would not keep
		func(r *snapshot.FileRecord) { r.Size++ },    // another size
		func(r *snapshot.FileRecord) { r.Checksum = snapshot.FormatChecksum(1) },
	} {
		r := rec
		bad(&r)
		if _, err := s.get(2, r); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Errorf("record %+v: %v", r, err)
		}
	}
}

func flip(dir, name string, at int64) {
	p := filepath.Join(dir, name)
	b, _ := os.ReadFile(p)
	b[at] ^= 1
	os.WriteFile(p, b, 0o600)
}
