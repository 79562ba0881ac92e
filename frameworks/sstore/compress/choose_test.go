package compress

import (
	"bytes"
	"strings"
	"testing"
)

func TestChoose(t *testing.T) {
	warm := smoothField(4 << 20)
	f32 := float32Field(4 << 20)
	rnd := randomBytes(4<<20, 7)
	text := []byte(strings.Repeat("gompi checkpoint state ", 200000))
	small := smoothField(SampleMin - 8)
	for _, tc := range []struct {
		name, alg, mode string
		data            []byte
		want            Choice
	}{
		{"none never compresses", None, ShuffleAuto, warm, Choice{}},
		{"smooth float64 auto", Zstd, ShuffleAuto, warm, Choice{true, DeltaShuffle}},
		{"smooth float64 s2 auto", S2, ShuffleAuto, warm, Choice{true, DeltaShuffle}},
		// Some filter: the 4-byte shuffle, or the 8-byte delta shuffle
		// that sees two floats as one smooth integer, whichever is smaller.
		{"float32 auto", Zstd, ShuffleAuto, f32, Choice{true, "*"}},
		{"smooth float64 off", Zstd, ShuffleOff, warm, Choice{}}, // zstd alone does not shrink it by 5 %
		{"smooth float64 on", Zstd, ShuffleOn, warm, Choice{true, DeltaShuffle}},
		{"random auto", Zstd, ShuffleAuto, rnd, Choice{}},
		{"random on", Zstd, ShuffleOn, rnd, Choice{}},
		{"text auto: the shuffle does not win", Zstd, ShuffleAuto, text, Choice{true, ""}},
		{"small auto", Zstd, ShuffleAuto, small, Choice{true, ""}},
		{"small on", Zstd, ShuffleOn, small, Choice{true, Shuffle8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Choose(t.Context(), bytes.NewReader(tc.data), int64(len(tc.data)), tc.alg, 0, tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want.Filter == "*" && got.Compress && got.Filter != "" {
				return
			}
			if got != tc.want {
				t.Errorf("Choose = %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := Choose(t.Context(), bytes.NewReader(warm), int64(len(warm)), Zstd, 0, "sometimes"); err == nil || !strings.Contains(err.Error(), "unknown shuffle mode") {
		t.Errorf("bad mode: %v", err)
	}
}

// BenchmarkChoose: what sampling costs per file, on random bytes (where
// it must give up after one sample) and on a smooth field.
func BenchmarkChoose(b *testing.B) {
	data := map[string][]byte{"random": randomBytes(64<<20, 3), "field": fieldGrid(64 << 20)}
	for _, kind := range []string{"random", "field"} {
		for _, alg := range []string{Zstd, S2} {
			for _, mode := range []string{ShuffleOff, ShuffleAuto} {
				b.Run(kind+"/"+alg+"/"+mode, func(b *testing.B) {
					r := bytes.NewReader(data[kind])
					for b.Loop() {
						if _, err := Choose(b.Context(), r, int64(len(data[kind])), alg, 1, mode); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
