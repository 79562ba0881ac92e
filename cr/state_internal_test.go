package cr

import (
	"bytes"
	"encoding/gob"
	"errors"
	"reflect"
	"testing"

	"gompi/frameworks/sstore"
)

func encodeApp(t testing.TB, af appFile) []byte {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&af); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecodeAppState(t *testing.T) {
	good := appFile{Format: appFormat, Rank: 2, SafePoint: 7, Names: []string{"a", "b"}, Values: [][]byte{{1}, {2}}}
	af, err := decodeAppState(bytes.NewReader(encodeApp(t, good)))
	if err != nil || !reflect.DeepEqual(*af, good) {
		t.Fatalf("decode: %+v, %v", af, err)
	}
	tests := []struct {
		name string
		af   appFile
		raw  []byte
	}{
		{"garbage", appFile{}, []byte("not gob at all")},
		{"empty", appFile{}, []byte{}},
		{"future format", appFile{Format: appFormat + 1, SafePoint: 1}, nil},
		{"no safe point", appFile{Format: appFormat}, nil},
		{"names and values", appFile{Format: appFormat, SafePoint: 1, Names: []string{"a"}}, nil},
		{"repeated name", appFile{Format: appFormat, SafePoint: 1, Names: []string{"a", "a"}, Values: [][]byte{{}, {}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := tt.raw
			if raw == nil {
				raw = encodeApp(t, tt.af)
			}
			if _, err := decodeAppState(bytes.NewReader(raw)); err == nil {
				t.Fatal("accepted")
			} else if tt.name != "future format" && !errors.Is(err, sstore.ErrCorrupt) {
				t.Fatalf("%v does not wrap sstore.ErrCorrupt", err)
			}
		})
	}
}

func FuzzDecodeAppState(f *testing.F) {
	f.Add(encodeApp(f, appFile{Format: appFormat, Rank: 1, SafePoint: 3, Names: []string{"grid"}, Values: [][]byte{{1, 2, 3}}}))
	f.Add([]byte{})
	f.Add([]byte("\x07\xff\x81\x03\x01\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		af, err := decodeAppState(bytes.NewReader(b))
		if err == nil && (af.SafePoint == 0 || len(af.Names) != len(af.Values)) {
			t.Fatalf("accepted an inconsistent app.state: %+v", af)
		}
	})
}
