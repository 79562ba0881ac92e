package cr

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"reflect"
	"testing"

	"gompi/frameworks/sstore/snapshot"
)

// encodeHeader writes an app.state made of header h and payloads as given,
// consistent or not, for the decoder's tests.
func encodeHeader(t testing.TB, h appHeader, payloads ...[]byte) []byte {
	var hb bytes.Buffer
	if err := gob.NewEncoder(&hb).Encode(&h); err != nil {
		t.Fatal(err)
	}
	out := binary.BigEndian.AppendUint64(nil, uint64(hb.Len()))
	out = append(out, hb.Bytes()...)
	for _, p := range payloads {
		out = append(out, p...)
	}
	return out
}

type point struct{ X, Y int }

func TestAppStateRoundTrip(t *testing.T) {
	bytesV := []byte("raw bytes, written as they are")
	floats := []float64{1.5, -2, 3e300}
	ints := []int32{7, -8}
	empty := []float64{}
	step := 42
	name := "heat"
	pts := map[string]point{"a": {1, 2}}
	ptrs := []any{&bytesV, &floats, &ints, &empty, &step, &name, &pts}
	names := []string{"bytes", "floats", "ints", "empty", "step", "name", "pts"}
	var buf bytes.Buffer
	if err := writeAppState(&buf, 3, 9, names, ptrs); err != nil {
		t.Fatal(err)
	}
	af, err := decodeAppState(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if af.Rank != 3 || af.SafePoint != 9 || !reflect.DeepEqual(af.Names, names) {
		t.Fatalf("header %+v", af.appHeader)
	}
	wantKinds := []byte{valueRaw, valueRaw, valueRaw, valueRaw, valueGob, valueGob, valueGob}
	if !bytes.Equal(af.Kinds, wantKinds) {
		t.Errorf("kinds %v, want %v", af.Kinds, wantKinds)
	}
	var (
		gotBytes  []byte
		gotFloats []float64
		gotInts   []int32
		gotEmpty  []float64
		gotStep   int
		gotName   string
		gotPts    map[string]point
	)
	outs := []any{&gotBytes, &gotFloats, &gotInts, &gotEmpty, &gotStep, &gotName, &gotPts}
	for i, p := range outs {
		if err := restoreValue(p, af.Kinds[i], af.Types[i], af.Values[i]); err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
	}
	if !bytes.Equal(gotBytes, bytesV) || !reflect.DeepEqual(gotFloats, floats) || !reflect.DeepEqual(gotInts, ints) ||
		len(gotEmpty) != 0 || gotStep != step || gotName != name || !reflect.DeepEqual(gotPts, pts) {
		t.Errorf("restored %v %v %v %v %v %q %v", gotBytes, gotFloats, gotInts, gotEmpty, gotStep, gotName, gotPts)
	}
	// A value registered under another type is refused, naming both.
	var wrong []int64
	if err := restoreValue(&wrong, af.Kinds[1], af.Types[1], af.Values[1]); err == nil {
		t.Error("[]float64 restored into a []int64")
	}
}

func TestDecodeAppState(t *testing.T) {
	good := appHeader{Format: appFormat, Rank: 2, SafePoint: 7, Names: []string{"a", "b"},
		Kinds: []byte{valueRaw, valueRaw}, Types: []string{"[]uint8", "[]uint8"}, Sizes: []int64{1, 1}}
	raw := encodeHeader(t, good, []byte{1}, []byte{2})
	af, err := decodeAppState(bytes.NewReader(raw), int64(len(raw)))
	if err != nil || !reflect.DeepEqual(af.appHeader, good) || !reflect.DeepEqual(af.Values, [][]byte{{1}, {2}}) {
		t.Fatalf("decode: %+v, %v", af, err)
	}
	bad := func(mod func(h *appHeader)) appHeader {
		h := good
		h.Names, h.Kinds, h.Types, h.Sizes = append([]string(nil), good.Names...), append([]byte(nil), good.Kinds...), append([]string(nil), good.Types...), append([]int64(nil), good.Sizes...)
		mod(&h)
		return h
	}
	tests := []struct {
		name string
		raw  []byte
	}{
		{"garbage", []byte("not an app.state at all")},
		{"empty", []byte{}},
		{"huge header length", binary.BigEndian.AppendUint64(nil, 1<<62)},
		{"future format", encodeHeader(t, bad(func(h *appHeader) { h.Format = appFormat + 1 }), []byte{1}, []byte{2})},
		{"no safe point", encodeHeader(t, bad(func(h *appHeader) { h.SafePoint = 0 }), []byte{1}, []byte{2})},
		{"names and sizes", encodeHeader(t, bad(func(h *appHeader) { h.Sizes = h.Sizes[:1] }), []byte{1}, []byte{2})},
		{"repeated name", encodeHeader(t, bad(func(h *appHeader) { h.Names[1] = "a" }), []byte{1}, []byte{2})},
		{"size beyond the file", encodeHeader(t, bad(func(h *appHeader) { h.Sizes[1] = 1 << 40 }), []byte{1}, []byte{2})},
		{"bytes after the values", encodeHeader(t, good, []byte{1}, []byte{2}, []byte{3})},
		{"truncated", encodeHeader(t, good, []byte{1})},
		{"unknown kind", encodeHeader(t, bad(func(h *appHeader) { h.Kinds[0] = 9 }), []byte{1}, []byte{2})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeAppState(bytes.NewReader(tt.raw), int64(len(tt.raw))); err == nil {
				t.Fatal("accepted")
			} else if tt.name != "future format" && !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("%v does not wrap snapshot.ErrCorrupt", err)
			}
		})
	}
}

func FuzzDecodeAppState(f *testing.F) {
	grid := []float64{1, 2, 3}
	var buf bytes.Buffer
	if err := writeAppState(&buf, 1, 3, []string{"grid"}, []any{&grid}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte{})
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x07\xff\x81\x03\x01\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		af, err := decodeAppState(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		if af.SafePoint == 0 || len(af.Names) != len(af.Values) || len(af.Kinds) != len(af.Values) {
			t.Fatalf("accepted an inconsistent app.state: %+v", af)
		}
		for i := range af.Values {
			var out any = new([]byte)
			_ = restoreValue(out, af.Kinds[i], af.Types[i], af.Values[i]) // must not panic
		}
	})
}
