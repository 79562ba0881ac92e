package cr

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"fmt"
	"io"
	"reflect"
	"unsafe"

	"gompi/frameworks/sstore/snapshot"
)

// app.state, format 2: an 8-byte big-endian length, the gob-encoded
// appHeader of that length, then each value's payload in order. A slice
// of fixed-size numbers ([]byte, []float64, ...) is written as its memory,
// straight from the program's slice to the file: the bulk of a rank's
// state costs no encoding and no copy. Anything else is gob-encoded.
// Format 1 gob-encoded every value into a buffer and the buffers into the
// file, so a 256 MiB slice was copied three times before it reached the
// disk.
const appFormat = 2

const (
	valueGob byte = iota // payload is the gob encoding of the value
	valueRaw             // payload is the memory of a slice of fixed-size numbers (little-endian)
)

// maxAppHeader bounds the header a reader accepts (names and sizes only).
const maxAppHeader = 16 << 20

// appHeader leads app.state.
type appHeader struct {
	Format    int
	Rank      int
	SafePoint uint64
	Names     []string
	Kinds     []byte
	Types     []string // the Go type of each value, checked on restore
	Sizes     []int64
	// Dists says how each value is distributed over the ranks (empty in
	// files of a gompi before restarts on another rank count: every
	// value is then distPlain); distribute.go.
	Dists []valueDist
}

// appFile is a decoded app.state.
type appFile struct {
	appHeader
	Values [][]byte
}

// rawView returns the memory of *ptr when it is a slice of fixed-size
// numbers, to be written as it is.
func rawView(ptr any) ([]byte, bool) {
	v := reflect.ValueOf(ptr).Elem()
	if v.Kind() != reflect.Slice || !fixedNumber(v.Type().Elem().Kind()) {
		return nil, false
	}
	n := v.Len() * int(v.Type().Elem().Size())
	if n == 0 {
		return []byte{}, true
	}
	return unsafe.Slice((*byte)(v.UnsafePointer()), n), true
}

func fixedNumber(k reflect.Kind) bool {
	switch k {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	}
	return false
}

// writeAppState writes the registered values to w.
func writeAppState(w io.Writer, rank int, at uint64, names []string, ptrs []any) error {
	return writeAppStateOf(w, rank, at, names, ptrs, nil)
}

// writeAppStateOf writes the registered values to w, each distributed as
// dists says (nil: every value plain).
func writeAppStateOf(w io.Writer, rank int, at uint64, names []string, ptrs []any, dists []distSpec) error {
	h := appHeader{Format: appFormat, Rank: rank, SafePoint: at, Names: names}
	payloads := make([][]byte, len(ptrs))
	for i, p := range ptrs {
		h.Types = append(h.Types, reflect.TypeOf(p).Elem().String())
		var d distSpec
		if dists != nil {
			d = dists[i]
		}
		vd := valueDist{Mode: d.mode}
		if d.mode == distBlock {
			raw, bd, err := d.blockView(p)
			if err != nil {
				return fmt.Errorf("save %q: %w", names[i], err)
			}
			h.Kinds, payloads[i], vd = append(h.Kinds, valueRaw), raw, bd
		} else if raw, ok := rawView(p); ok {
			h.Kinds, payloads[i] = append(h.Kinds, valueRaw), raw
		} else {
			var buf bytes.Buffer
			if err := gob.NewEncoder(&buf).Encode(p); err != nil {
				return fmt.Errorf("save %q: %w", names[i], err)
			}
			h.Kinds, payloads[i] = append(h.Kinds, valueGob), buf.Bytes()
		}
		h.Sizes = append(h.Sizes, int64(len(payloads[i])))
		h.Dists = append(h.Dists, vd)
	}
	var hb bytes.Buffer
	hb.Write(make([]byte, 8))
	if err := gob.NewEncoder(&hb).Encode(&h); err != nil {
		return err
	}
	binary.BigEndian.PutUint64(hb.Bytes()[:8], uint64(hb.Len()-8))
	if _, err := w.Write(hb.Bytes()); err != nil {
		return err
	}
	for _, p := range payloads {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// decodeAppState reads and checks app.state of size bytes; it never
// panics, and never allocates more than the input holds.
func decodeAppState(r io.Reader, size int64) (*appFile, error) {
	h, _, err := decodeAppHeader(r, size)
	if err != nil {
		return nil, err
	}
	af := appFile{appHeader: *h}
	n := len(af.Names)
	af.Values = make([][]byte, n)
	for i := range af.Values {
		af.Values[i] = make([]byte, af.Sizes[i])
		if _, err := io.ReadFull(r, af.Values[i]); err != nil {
			return nil, fmt.Errorf("%w: value %q: %w", snapshot.ErrCorrupt, af.Names[i], err)
		}
	}
	return &af, nil
}

// decodeAppHeader reads and checks the header of app.state of size
// bytes, leaving r at the first value, whose offset it returns: the
// values' sizes are checked to fill the rest of the file exactly.
func decodeAppHeader(r io.Reader, size int64) (*appHeader, int64, error) {
	var lb [8]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return nil, 0, fmt.Errorf("%w: header length: %w", snapshot.ErrCorrupt, err)
	}
	hl := binary.BigEndian.Uint64(lb[:])
	if hl > maxAppHeader || int64(hl) > size-8 {
		return nil, 0, fmt.Errorf("%w: header of %d bytes in a file of %d", snapshot.ErrCorrupt, hl, size)
	}
	hb := make([]byte, hl)
	if _, err := io.ReadFull(r, hb); err != nil {
		return nil, 0, fmt.Errorf("%w: header: %w", snapshot.ErrCorrupt, err)
	}
	var af appHeader
	if err := gob.NewDecoder(bytes.NewReader(hb)).Decode(&af); err != nil {
		return nil, 0, fmt.Errorf("%w: header: %w", snapshot.ErrCorrupt, err)
	}
	n := len(af.Names)
	switch {
	case af.Format != appFormat:
		return nil, 0, fmt.Errorf("format %d, this library reads format %d", af.Format, appFormat)
	case af.Rank < 0 || af.SafePoint == 0 || len(af.Kinds) != n || len(af.Types) != n || len(af.Sizes) != n:
		return nil, 0, fmt.Errorf("%w: rank %d, safe point %d, %d names for %d kinds, %d types, %d sizes",
			snapshot.ErrCorrupt, af.Rank, af.SafePoint, n, len(af.Kinds), len(af.Types), len(af.Sizes))
	}
	if err := checkDists(&af); err != nil {
		return nil, 0, err
	}
	left := size - 8 - int64(hl)
	seen := map[string]bool{}
	for i, name := range af.Names {
		if name == "" || seen[name] {
			return nil, 0, fmt.Errorf("%w: value name %q empty or repeated", snapshot.ErrCorrupt, name)
		}
		seen[name] = true
		if af.Kinds[i] > valueRaw || af.Sizes[i] < 0 || af.Sizes[i] > left {
			return nil, 0, fmt.Errorf("%w: value %q: kind %d, %d bytes, %d left in the file", snapshot.ErrCorrupt, name, af.Kinds[i], af.Sizes[i], left)
		}
		left -= af.Sizes[i]
	}
	if left != 0 {
		return nil, 0, fmt.Errorf("%w: %d bytes after the last value", snapshot.ErrCorrupt, left)
	}
	return &af, 8 + int64(hl), nil
}

// restoreValue fills *ptr (zeroed first) with a saved payload.
func restoreValue(ptr any, kind byte, typ string, data []byte) error {
	v := reflect.ValueOf(ptr).Elem()
	if got := v.Type().String(); got != typ {
		return fmt.Errorf("decode the saved value: it was saved as a %s, the program registers a %s", typ, got)
	}
	v.SetZero()
	if kind == valueGob {
		if err := gob.NewDecoder(bytes.NewReader(data)).Decode(ptr); err != nil {
			return fmt.Errorf("decode the saved value into a %s: %w", v.Type(), err)
		}
		return nil
	}
	if v.Kind() != reflect.Slice || !fixedNumber(v.Type().Elem().Kind()) {
		return fmt.Errorf("raw bytes cannot fill a %s", v.Type())
	}
	es := int(v.Type().Elem().Size())
	if len(data)%es != 0 {
		return fmt.Errorf("%d bytes are not a whole number of %d-byte elements", len(data), es)
	}
	if v.Type().Elem().Kind() == reflect.Uint8 && v.Type().Elem().PkgPath() == "" {
		v.SetBytes(data) // the payload was read for this value alone: no copy
		return nil
	}
	s := reflect.MakeSlice(v.Type(), len(data)/es, len(data)/es)
	if len(data) > 0 {
		copy(unsafe.Slice((*byte)(s.UnsafePointer()), len(data)), data)
	}
	v.Set(s)
	return nil
}
