package blocks

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"gompi/frameworks/sstore/snapshot"
)

const sum0 = "0000000000000000000000000000000000000000000000000000000000000000"

func sample() *Manifest {
	return &Manifest{Seq: 5, Size: 3*MinBlockSize + 10, BlockSize: MinBlockSize, Chain: 2,
		Packs: map[int]string{3: "a b.pack", 5: "a b.pack"},
		Blocks: []Entry{
			{Seq: 3, Off: 0, Len: MinBlockSize, Enc: None},
			{Seq: 5, Off: 0, Len: 100, Enc: "zstd", Filter: snapshot.FilterShuffle8, Sum: [32]byte{1}},
			{Seq: 3, Off: MinBlockSize, Len: 70, Enc: "s2"},
			{Seq: 5, Off: 100, Len: 10, Enc: None},
		}}
}

func TestManifestRoundTrip(t *testing.T) {
	for _, m := range []*Manifest{
		sample(),
		{Seq: 0, Size: 0, BlockSize: DefaultBlockSize, Packs: map[int]string{}},
		{Seq: 7, Size: 1, BlockSize: MaxBlockSize, Packs: map[int]string{7: "x"}, Blocks: []Entry{{Seq: 7, Len: 1, Enc: None}}},
	} {
		var b bytes.Buffer
		if err := m.Encode(&b); err != nil {
			t.Fatal(err)
		}
		got, err := Parse(&b, "m", m.Seq)
		if err != nil {
			t.Fatalf("%v\n%s", err, b.String())
		}
		if len(m.Blocks) == 0 {
			m.Blocks = nil
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, m)
		}
	}
	if got := sample().Referenced(); !reflect.DeepEqual(got, []int{3}) {
		t.Errorf("Referenced = %v", got)
	}
}

// hostile manifests, each refused naming the file with what is wrong.
var hostile = []struct{ name, in, want string }{
	{"empty", "", "no seq line"},
	{"not a manifest", "gompi local snapshot metadata\n", "not a block manifest"},
	{"no seq line", Header + "\n", "no seq line"},
	{"two seq lines", Header + "\nseq 5 size 0 blocksize 4096 chain 0\nseq 5 size 0 blocksize 4096 chain 0\n", "a second seq line"},
	{"another sequence's", Header + "\nseq 4 size 0 blocksize 4096 chain 0\n", "manifest of sequence 4 in the folder of sequence 5"},
	{"absurd size", Header + "\nseq 5 size 99999999999999999999 blocksize 4096 chain 0\n", "bad size"},
	{"size past the bound", Header + "\nseq 5 size 1125899906842625 blocksize 4096 chain 0\n", "above"},
	{"too many blocks", Header + "\nseq 5 size 68719476736 blocksize 4096 chain 0\n", "more than 1048576"},
	{"tiny blocks", Header + "\nseq 5 size 10 blocksize 1 chain 0\n", "block size 1 below 4096"},
	{"huge blocks", Header + "\nseq 5 size 10 blocksize 134217728 chain 0\n", "above"},
	{"negative chain", Header + "\nseq 5 size 0 blocksize 4096 chain -1\n", "bad chain"},
	{"block before seq", Header + "\nblock 0 5 0 1 none - " + sum0 + "\n", "before the seq line"},
	{"missing blocks", Header + "\nseq 5 size 5000 blocksize 4096 chain 0\npack 5 \"p\"\nblock 0 5 0 4096 none - " + sum0 + "\n", "1 block lines"},
	{"extra block", Header + "\nseq 5 size 10 blocksize 4096 chain 0\npack 5 \"p\"\nblock 0 5 0 10 none - " + sum0 + "\nblock 1 5 10 10 none - " + sum0 + "\n", "beyond the 1 blocks"},
	{"blocks out of order", Header + "\nseq 5 size 5000 blocksize 4096 chain 0\npack 5 \"p\"\nblock 1 5 0 904 none - " + sum0 + "\n", "block 1 where block 0 belongs"},
	{"a newer sequence's block (a cycle)", Header + "\nseq 5 size 10 blocksize 4096 chain 1\npack 5 \"p\"\nblock 0 6 0 10 none - " + sum0 + "\n", "newer than this sequence 5"},
	{"a newer sequence's pack (a cycle)", Header + "\nseq 5 size 10 blocksize 4096 chain 1\npack 9 \"p\"\n", "a cycle or a forward reference"},
	{"a sequence without a pack", Header + "\nseq 5 size 10 blocksize 4096 chain 1\npack 5 \"p\"\nblock 0 2 0 10 none - " + sum0 + "\n", "sequence 2, which has no pack line"},
	{"a pack outside the folder", Header + "\nseq 5 size 10 blocksize 4096 chain 1\npack 3 \"../../../etc/passwd\"\n", "not a file name of the snapshot's folder"},
	{"a pack in a folder", Header + "\nseq 5 size 10 blocksize 4096 chain 1\npack 3 \"x/y\"\n", "not a file name"},
	{"the metadata as a pack", Header + "\nseq 5 size 10 blocksize 4096 chain 1\npack 3 \"snapshot_meta\"\n", "not a file name"},
	{"dot-dot pack", Header + "\nseq 5 size 10 blocksize 4096 chain 1\npack 3 \"..\"\n", "not a file name"},
	{"unquoted pack", Header + "\nseq 5 size 10 blocksize 4096 chain 1\npack 3 p\n", "is not quoted"},
	{"two packs of a sequence", Header + "\nseq 5 size 10 blocksize 4096 chain 1\npack 3 \"p\"\npack 3 \"q\"\n", "two packs of sequence 3"},
	{"an unused pack", Header + "\nseq 5 size 10 blocksize 4096 chain 1\npack 3 \"p\"\npack 5 \"p\"\nblock 0 5 0 10 none - " + sum0 + "\n", "pack of sequence 3 holds no block"},
	{"full yet referencing", Header + "\nseq 5 size 10 blocksize 4096 chain 0\npack 3 \"p\"\nblock 0 3 0 10 none - " + sum0 + "\n", "chain 0 (a full checkpoint) references"},
	{"absurd stored length", Header + "\nseq 5 size 10 blocksize 4096 chain 0\npack 5 \"p\"\nblock 0 5 0 999999999 zstd - " + sum0 + "\n", "stored length 999999999 above"},
	{"raw block of the wrong length", Header + "\nseq 5 size 10 blocksize 4096 chain 0\npack 5 \"p\"\nblock 0 5 0 9 none - " + sum0 + "\n", "stored as is"},
	{"unknown filter", Header + "\nseq 5 size 10 blocksize 4096 chain 0\npack 5 \"p\"\nblock 0 5 0 9 zstd rot13 " + sum0 + "\n", "unknown filter"},
	{"short hash", Header + "\nseq 5 size 10 blocksize 4096 chain 0\npack 5 \"p\"\nblock 0 5 0 10 none - abcd\n", "is not 64 hex digits"},
	{"a line past the bound", Header + "\nseq 5 size 10 blocksize 4096 chain 0\npack 5 \"" + strings.Repeat("x", 3000) + "\"\n", "longer than 2048 bytes"},
	{"unknown record", Header + "\nseq 5 size 0 blocksize 4096 chain 0\nexec rm -rf /\n", "unknown record"},
}

func TestHostileManifest(t *testing.T) {
	for _, tt := range hostile {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse(strings.NewReader(tt.in), "hostile.blocks", 5)
			if err == nil {
				t.Fatalf("accepted: %+v", m)
			}
			if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "hostile.blocks") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q: want ErrCorrupt naming the file and saying %q", err, tt.want)
			}
		})
	}
}

func FuzzParseManifest(f *testing.F) {
	var b bytes.Buffer
	sample().Encode(&b)
	f.Add(b.String())
	for _, tt := range hostile {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		m, err := Parse(strings.NewReader(in), "fuzz", 5)
		if err != nil {
			if !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		if int64(len(m.Blocks)) != NumBlocks(m.Size, m.BlockSize) || m.BlockSize < MinBlockSize || m.BlockSize > MaxBlockSize {
			t.Fatalf("inconsistent manifest accepted: %+v", m)
		}
		for s, p := range m.Packs {
			if s > m.Seq || CheckName(p) != nil {
				t.Fatalf("pack %d %q accepted in sequence %d", s, p, m.Seq)
			}
		}
		for i, e := range m.Blocks {
			if _, ok := m.Packs[e.Seq]; !ok || e.Seq > m.Seq || e.Len > MaxStored(m.BlockSize) || e.Off < 0 {
				t.Fatalf("block %d %+v accepted", i, e)
			}
		}
		var out bytes.Buffer
		m.Encode(&out)
		again, err := Parse(&out, "again", 5)
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
