package cr

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"

	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
)

// A restart on another rank count (gompi-restart -np M) starts each rank
// from a local snapshot gompi-restart made for it in a repartition
// sequence: a fresh library state for a world of M ranks, and, linked in
// (never copied), the app.state of every rank of the sequence it was made
// from, named SourceFile(k). Its snapshot_meta says so (MetaFromRanks,
// MetaFromSeq). Each rank reads those files' headers, then, for every
// value it registers, only the bytes it needs: a distributed array's
// overlapping runs, a replicated value's rank 0 copy, the values a
// ProtectFunc function asks for. Nothing is gathered in one place.

// The CRS Meta keys of a repartitioned local snapshot.
const (
	MetaFromRanks = "repartition-from-ranks" // rank count of the checkpointed job
	MetaFromSeq   = "repartition-from-seq"   // the sequence it was made from
)

// SourceFile is the name, in a repartitioned local snapshot, of rank k's
// app.state of the sequence it was made from.
func SourceFile(k int) string { return AppStateFile + ".from-" + strconv.Itoa(k) }

// appSource is one old rank's app.state: its header and where each value's
// payload starts.
type appSource struct {
	path string
	hdr  *appHeader
	offs []int64
}

// readSource reads the header of an app.state file: its values' names,
// kinds, sizes and distributions, and the safe point it was saved at.
func readSource(path string) (*appSource, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	h, start, err := decodeAppHeader(bufio.NewReader(f), fi.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s := &appSource{path: path, hdr: h}
	for _, sz := range h.Sizes {
		s.offs = append(s.offs, start)
		start += sz
	}
	return s, nil
}

// readAt fills buf from value i's payload at offset off.
func (s *appSource) readAt(i int, off int64, buf []byte) error {
	f, err := os.Open(s.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.ReadAt(buf, s.offs[i]+off); err != nil && !(err == io.EOF && len(buf) == 0) {
		return fmt.Errorf("%s: value %q: %w", s.path, s.hdr.Names[i], err)
	}
	return nil
}

// payload reads value i's whole payload.
func (s *appSource) payload(i int) ([]byte, error) {
	buf := make([]byte, s.hdr.Sizes[i])
	return buf, s.readAt(i, 0, buf)
}

// fromRanks is the rank count a repartitioned local snapshot was made
// from, 0 for any other.
func fromRanks(meta *snapshot.LocalMeta) (int, error) {
	v, ok := meta.CRSMeta[MetaFromRanks]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > snapshot.MaxRanks {
		return 0, fmt.Errorf("%w: %s %q", snapshot.ErrCorrupt, MetaFromRanks, v)
	}
	return n, nil
}

// loadRepartition prepares the restart of a rank from a repartitioned
// local snapshot of n old ranks. gompi-restart checked every source's
// checksum before it made the snapshot; here only sizes are checked, so
// that no rank reads what it does not need.
func (c *Coordinator) loadRepartition(info snapc.RestartInfo, meta *snapshot.LocalMeta, n int) error {
	rank := c.p.Rank()
	if err := meta.VerifySizes(info.Dir); err != nil {
		return fmt.Errorf("cr: rank %d: restart: %w", rank, err)
	}
	srcs := make([]*appSource, n)
	for k := range srcs {
		s, err := readSource(filepath.Join(info.Dir, SourceFile(k)))
		if err != nil {
			return fmt.Errorf("cr: rank %d: restart on %d ranks from %d: %w", rank, c.p.Size(), n, err)
		}
		first := srcs[0]
		if k == 0 {
			first = s
		}
		if s.hdr.Rank != k || s.hdr.SafePoint != first.hdr.SafePoint || !slices.Equal(s.hdr.Names, first.hdr.Names) {
			return fmt.Errorf("cr: rank %d: restart: %s: %w: saved by rank %d at safe point %d with values %q, rank 0 at %d with %q",
				rank, s.path, snapshot.ErrCorrupt, s.hdr.Rank, s.hdr.SafePoint, s.hdr.Names, first.hdr.SafePoint, first.hdr.Names)
		}
		srcs[k] = s
	}
	h := srcs[0].hdr
	rs := &restartState{info: info, at: h.SafePoint, file: &appFile{appHeader: *h}, names: h.Names, restored: map[string]bool{}, sources: srcs}
	c.restart = rs
	c.count = h.SafePoint - 1
	c.attempted = h.SafePoint
	c.signalRequestedLocked()
	return nil
}

// fillRepartitioned fills *ptr, registered as d says, from the old ranks'
// values of name.
func (rs *restartState) fillRepartitioned(name string, ptr any, d distSpec) error {
	i := slices.Index(rs.names, name)
	if i < 0 {
		return fmt.Errorf("the snapshot holds no value of that name (it holds: %q)", rs.names)
	}
	src0 := rs.sources[0]
	if saved := src0.hdr.dist(i).Mode; saved != d.mode {
		return fmt.Errorf("saved as %s, registered now as %s", modeName(saved), modeName(d.mode))
	}
	switch d.mode {
	case distReplicated:
		data, err := src0.payload(i)
		if err != nil {
			return err
		}
		return restoreValue(ptr, src0.hdr.Kinds[i], src0.hdr.Types[i], data)
	case distFunc:
		reflect.ValueOf(ptr).Elem().SetZero()
		return d.fn(Saved{ranks: len(rs.sources), decode: func(k int, into any) error {
			s := rs.sources[k]
			data, err := s.payload(i)
			if err != nil {
				return err
			}
			return restoreValue(into, s.hdr.Kinds[i], s.hdr.Types[i], data)
		}})
	case distBlock:
		return rs.fillBlock(i, ptr, d)
	}
	return fmt.Errorf("registered with Protect, which says nothing of how the value is spread over the ranks: a restart on another rank count cannot redistribute it (declare it with ProtectDistributed, ProtectReplicated or ProtectFunc)")
}

// fillBlock reads the rank's run of a distributed array from the old
// runs that overlap it, straight into the program's slice.
func (rs *restartState) fillBlock(i int, ptr any, d distSpec) error {
	own, now, err := d.blockView(ptr)
	if err != nil {
		return err
	}
	var covered int64
	for _, s := range rs.sources {
		sd := s.hdr.dist(i)
		if s.hdr.Types[i] != reflect.TypeOf(ptr).Elem().String() || sd.Global != now.Global || sd.Elem != now.Elem {
			return fmt.Errorf("rank %d saved a %s of %d elements of %d bytes, the program registers a %s of %d elements of %d bytes",
				s.hdr.Rank, s.hdr.Types[i], sd.Global, sd.Elem, reflect.TypeOf(ptr).Elem(), now.Global, now.Elem)
		}
		lo, hi := max(now.Lo, sd.Lo), min(now.Lo+now.Count, sd.Lo+sd.Count)
		if lo >= hi {
			continue
		}
		dst := own[(lo-now.Lo)*now.Elem : (hi-now.Lo)*now.Elem]
		if err := s.readAt(i, (lo-sd.Lo)*sd.Elem, dst); err != nil {
			return err
		}
		covered += hi - lo
	}
	if covered != now.Count {
		return fmt.Errorf("the saved runs cover %d of the rank's %d elements %d to %d: the snapshot's runs overlap or leave a gap", covered, now.Count, now.Lo, now.Lo+now.Count-1)
	}
	return nil
}

func modeName(m byte) string {
	switch m {
	case distBlock:
		return "a distributed array (ProtectDistributed)"
	case distReplicated:
		return "a replicated value (ProtectReplicated)"
	case distFunc:
		return "a value with its own redistribution (ProtectFunc)"
	}
	return "this rank's own value (Protect)"
}
