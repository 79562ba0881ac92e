package cr

import (
	"fmt"
	"reflect"

	"gompi/frameworks/sstore/snapshot"
)

// Redistributable state: what lets gompi-restart -np M restart a job
// checkpointed on N ranks. A value registered with Protect is this rank's
// alone and means nothing on another rank count; the program says how
// each of its values is spread over the ranks instead:
//
//   - ProtectDistributed: a block-distributed array, each rank holding a
//     contiguous run of its elements (any sizes, uneven ones included).
//     Each rank saves only its run, with where it lies in the whole; a
//     rank restarted on M ranks states its new run the same way and reads
//     exactly that from the saved runs that overlap it.
//   - ProtectReplicated: the same value on every rank (a step count, a
//     parameter, a residual); on M ranks every rank takes rank 0's.
//   - ProtectFunc: anything else; the program's function builds the value
//     from the N saved ones.
//
// On a restart on the same rank count each is restored as Protect
// restores a value (a distributed array's run must then be the saved one).

// Distribution modes recorded per value in app.state (valueDist.Mode).
const (
	distPlain      byte = iota // Protect: this rank's value, not redistributable
	distBlock                  // ProtectDistributed
	distReplicated             // ProtectReplicated: rank 0's value on every rank
	distFunc                   // ProtectFunc: the program redistributes it
)

// Block places this rank's part of a block-distributed array: the slice
// given to ProtectDistributed holds Halo elements, then the rank's own
// elements, global indices Lo, Lo+1, ..., then Halo elements again. An
// element is Elem bytes: a row of a row-distributed grid (its columns
// times the size of a number), or 0 for one element of the slice. Halos
// are neither saved nor restored: the program rebuilds them (a halo
// exchange) or keeps what it set (a fixed boundary).
type Block struct {
	Global int // elements of the whole array, over all ranks
	Lo     int // global index of this rank's first element
	Elem   int // bytes per element; 0: the slice's element size
	Halo   int // elements before and after the rank's own, not saved
}

// valueDist is how one saved value is distributed (app.state's Dists).
// For a block-distributed array: the rank saved elements Lo..Lo+Count-1
// of Global, Elem bytes each, and its payload is exactly those bytes.
type valueDist struct {
	Mode                    byte
	Global, Lo, Count, Elem int64
}

// distSpec is what the program registered about a value.
type distSpec struct {
	mode  byte
	block Block
	fn    Redistribute
}

// Redistribute builds a value registered with ProtectFunc on a restart on
// another rank count, from the values the N ranks saved.
type Redistribute func(saved Saved) error

// Saved is what a Redistribute function reads: the values the ranks of the
// checkpointed job saved under one name.
type Saved struct {
	ranks  int
	decode func(rank int, into any) error
}

// Ranks is the rank count of the checkpointed job.
func (s Saved) Ranks() int { return s.ranks }

// Decode fills *into, of the registered value's type, with the value rank
// saved.
func (s Saved) Decode(rank int, into any) error {
	if rank < 0 || rank >= s.ranks {
		return fmt.Errorf("cr: saved value of rank %d: the checkpointed job had ranks 0 to %d", rank, s.ranks-1)
	}
	return s.decode(rank, into)
}

// ProtectDistributed registers *ptr, a slice of fixed-size numbers, as
// this rank's part of a block-distributed array placed by b, to be saved
// at every checkpoint and redistributed by a restart on another rank
// count. On a restart the slice must already have its length for the
// rank's part now (its halos included): its own elements are filled from
// the snapshot, its halos left as they are.
func (c *Coordinator) ProtectDistributed(name string, ptr any, b Block) error {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Slice || !fixedNumber(v.Elem().Type().Elem().Kind()) {
		return fmt.Errorf("cr: protect %q: a distributed array is a pointer to a slice of fixed-size numbers, not %T", name, ptr)
	}
	es := int(v.Elem().Type().Elem().Size())
	if b.Elem == 0 {
		b.Elem = es
	}
	if b.Elem < 0 || b.Elem%es != 0 || b.Global < 0 || b.Lo < 0 || b.Lo > b.Global || b.Halo < 0 {
		return fmt.Errorf("cr: protect %q: block %+v: want Global >= Lo >= 0, Halo >= 0 and Elem a multiple of the %d-byte element", name, b, es)
	}
	d := distSpec{mode: distBlock, block: b}
	if _, _, err := d.blockView(ptr); err != nil {
		return fmt.Errorf("cr: protect %q: %w", name, err)
	}
	return c.protect(name, ptr, d)
}

// ProtectReplicated registers *ptr as a value every rank holds alike (as
// Protect would save it). A restart on another rank count gives every
// rank the value rank 0 saved; the values are not compared at a
// checkpoint (it would cost a collective), so a value that differs
// between ranks must be registered with ProtectFunc instead.
func (c *Coordinator) ProtectReplicated(name string, ptr any) error {
	return c.protect(name, ptr, distSpec{mode: distReplicated})
}

// ProtectFunc registers *ptr to be saved as Protect saves it; on a
// restart on another rank count *ptr is zeroed and f builds it from the
// values the checkpointed job's ranks saved (f runs inside ProtectFunc).
func (c *Coordinator) ProtectFunc(name string, ptr any, f Redistribute) error {
	if f == nil {
		return fmt.Errorf("cr: protect %q: nil redistribution function", name)
	}
	return c.protect(name, ptr, distSpec{mode: distFunc, fn: f})
}

// blockView is the memory of the rank's own elements of *ptr, and where
// they lie in the whole array.
func (d distSpec) blockView(ptr any) ([]byte, valueDist, error) {
	raw, _ := rawView(ptr)
	b := d.block
	if len(raw)%b.Elem != 0 {
		return nil, valueDist{}, fmt.Errorf("the slice holds %d bytes, not a whole number of %d-byte elements", len(raw), b.Elem)
	}
	count := len(raw)/b.Elem - 2*b.Halo
	if count < 0 || b.Lo+count > b.Global {
		return nil, valueDist{}, fmt.Errorf("the slice holds %d elements of %d bytes: with %d halo elements each side, the rank's elements %d to %d do not fit an array of %d",
			len(raw)/b.Elem, b.Elem, b.Halo, b.Lo, b.Lo+count-1, b.Global)
	}
	own := raw[b.Halo*b.Elem : (b.Halo+count)*b.Elem]
	return own, valueDist{Mode: distBlock, Global: int64(b.Global), Lo: int64(b.Lo), Count: int64(count), Elem: int64(b.Elem)}, nil
}

// checkDists checks the distributions a header records against its
// values: a block's run fits its array and is its payload exactly.
func checkDists(h *appHeader) error {
	if len(h.Dists) == 0 {
		return nil
	}
	if len(h.Dists) != len(h.Names) {
		return fmt.Errorf("%w: %d distributions for %d values", snapshot.ErrCorrupt, len(h.Dists), len(h.Names))
	}
	for i, d := range h.Dists {
		switch {
		case d.Mode > distFunc:
			return fmt.Errorf("%w: value %q: distribution %d", snapshot.ErrCorrupt, h.Names[i], d.Mode)
		case d.Mode != distBlock:
			continue
		case h.Kinds[i] != valueRaw || d.Elem < 1 || d.Count < 0 || d.Lo < 0 || d.Global < 0 ||
			d.Count > d.Global || d.Lo > d.Global-d.Count || d.Count > h.Sizes[i]/d.Elem || d.Count*d.Elem != h.Sizes[i]:
			return fmt.Errorf("%w: value %q: elements %d+%d of %d, %d bytes each, in %d bytes", snapshot.ErrCorrupt, h.Names[i], d.Lo, d.Count, d.Global, d.Elem, h.Sizes[i])
		}
	}
	return nil
}

// dist is value i's distribution (plain in a file that records none).
func (h *appHeader) dist(i int) valueDist {
	if len(h.Dists) == 0 {
		return valueDist{}
	}
	return h.Dists[i]
}

// setInterior copies data into the rank's own elements of *ptr at byte
// offset off.
func setInterior(ptr any, b Block, off int64, data []byte) {
	raw, _ := rawView(ptr)
	copy(raw[int64(b.Halo*b.Elem)+off:], data)
}

// fill restores a value on a restart on the same rank count: a block's
// run must be the one saved, the rest as Protect restores.
func (d distSpec) fill(ptr any, h *appHeader, i int, data []byte) error {
	if d.mode != distBlock {
		return restoreValue(ptr, h.Kinds[i], h.Types[i], data)
	}
	_, now, err := d.blockView(ptr)
	if err != nil {
		return err
	}
	saved := h.dist(i)
	if typ := reflect.TypeOf(ptr).Elem().String(); typ != h.Types[i] {
		return fmt.Errorf("it was saved as a %s, the program registers a %s", h.Types[i], typ)
	}
	if saved.Mode != distBlock || saved.Global != now.Global || saved.Elem != now.Elem || saved.Lo != now.Lo || saved.Count != now.Count {
		return fmt.Errorf("the rank now holds elements %d+%d of %d (%d bytes each), the snapshot elements %d+%d of %d (%d bytes each, %s): restart with the sizes of the checkpointed run (gompi-restart -np changes the rank count)",
			now.Lo, now.Count, now.Global, now.Elem, saved.Lo, saved.Count, saved.Global, saved.Elem, modeName(saved.Mode))
	}
	setInterior(ptr, d.block, 0, data)
	return nil
}

// ProtectDistributed registers a block-distributed array; see Coordinator.ProtectDistributed.
func ProtectDistributed(name string, ptr any, b Block) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.ProtectDistributed(name, ptr, b)
}

// ProtectReplicated registers a value every rank holds alike; see Coordinator.ProtectReplicated.
func ProtectReplicated(name string, ptr any) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.ProtectReplicated(name, ptr)
}

// ProtectFunc registers a value with its own redistribution; see Coordinator.ProtectFunc.
func ProtectFunc(name string, ptr any, f Redistribute) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.ProtectFunc(name, ptr, f)
}
