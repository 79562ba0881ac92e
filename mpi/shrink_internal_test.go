package mpi

import (
	"bytes"
	"testing"
)

func TestAgreeWire(t *testing.T) {
	for _, n := range []int{1, 7, 8, 9, 64} {
		f := newBitset(n)
		for r := 0; r < n; r += 3 {
			f.set(r)
		}
		b := encodeAgree(agreeEstimate, 42, f)
		m, err := decodeAgree(b, n)
		if err != nil || m.kind != agreeEstimate || m.next != 42 || !bytes.Equal(m.failed, f) {
			t.Fatalf("n=%d: decode(encode) = %+v, %v", n, m, err)
		}
	}
	bad := []struct {
		name string
		b    []byte
		n    int
	}{
		{"short", []byte{1, 4, 0, 0, 0, 0, 0, 0, 0}, 3},
		{"long", []byte{1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 3},
		{"kind", []byte{9, 4, 0, 0, 0, 0, 0, 0, 0, 0}, 3},
		{"rank beyond", []byte{1, 4, 0, 0, 0, 0, 0, 0, 0, 8}, 3},
		{"odd context", []byte{1, 5, 0, 0, 0, 0, 0, 0, 0, 0}, 3},
		{"reserved context", []byte{2, 2, 0, 0, 0, 0, 0, 0, 0, 0}, 3},
	}
	for _, tt := range bad {
		if _, err := decodeAgree(tt.b, tt.n); err == nil {
			t.Errorf("%s: decoded % x for %d ranks", tt.name, tt.b, tt.n)
		}
	}
}

func FuzzDecodeAgree(f *testing.F) {
	f.Add(encodeAgree(agreeExchange, 4, newBitset(5)), 5)
	f.Add(encodeAgree(agreeEstimate, 1<<40, bitset{0xff, 0x01}), 9)
	f.Add([]byte{}, 1)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 1 || n > 1<<16 {
			return
		}
		m, err := decodeAgree(b, n)
		if err != nil {
			return
		}
		// What decodes encodes back to the same bytes, and names only
		// ranks of the communicator.
		if got := encodeAgree(m.kind, m.next, m.failed); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded % x, read % x", got, b)
		}
		for r := n; r < len(m.failed)*8; r++ {
			if m.failed.has(r) {
				t.Fatalf("rank %d of %d set", r, n)
			}
		}
	})
}
