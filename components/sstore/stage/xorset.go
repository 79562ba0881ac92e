package stage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/frameworks/sstore/xor"
)

// XOR sets, as SCR has them (package xor holds the math): the job's nodes
// are cut into sets of sstore_stage_xor_set consecutive nodes of its node
// list (a last set smaller than xor.MinMembers joins the one before). A
// node's data for a sequence is its ranks' local snapshots read one after
// the other (each rank's snapshot_meta, then its files, in the order its
// manifest lists them). While it drains, each node puts its chunk for
// every other member's parity segment into that member's folder of the
// sequence, waits for the chunks of the others, and keeps its own segment
// with the set's record:
//
//	<root>/<node>/<ref name>/<seq>/.xor/in/<member>.chunk, <member>.json  (while it syncs)
//	<root>/<node>/<ref name>/<seq>/.xor/parity                            its segment
//	<root>/<node>/<ref name>/<seq>/.xor/set.json                          the set's record
//
// A rank whose node is lost is rebuilt on a member of its set from the
// other members' cached snapshots and parity segments (Fetch).

const (
	xorDirName    = ".xor"
	xorParityFile = "parity"
	xorRecordFile = "set.json"
	// xorPoll is how often a node looks for its set's chunks while it
	// waits for them (they arrive through FileM, with no message).
	xorPoll = 20 * time.Millisecond
)

// xorFile is one file of a member's data.
type xorFile struct {
	Rank int    `json:"rank"`
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// xorMember is one member of a set: its node and its data.
type xorMember struct {
	Node  string    `json:"node"`
	Files []xorFile `json:"files"`
}

func (m xorMember) size() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// xorRecord is a set's record, as each member keeps it with its segment.
type xorRecord struct {
	Seq     int         `json:"seq"`
	Self    int         `json:"self"` // the member keeping this record
	Members []xorMember `json:"members"`
}

func (r *xorRecord) set() xor.Set {
	s := xor.Set{}
	for _, m := range r.Members {
		s.Sizes = append(s.Sizes, m.size())
	}
	return s
}

// memberOf is the member whose data holds rank's snapshot, -1 if none.
func (r *xorRecord) memberOf(rank int) int {
	for i, m := range r.Members {
		for _, f := range m.Files {
			if f.Rank == rank {
				return i
			}
		}
	}
	return -1
}

// check refuses a record that does not describe a set (read from a node
// folder, it may be damaged or planted): names must be plain, every rank
// of one member only.
func (r *xorRecord) check() error {
	if len(r.Members) < xor.MinMembers || r.Self < 0 || r.Self >= len(r.Members) {
		return fmt.Errorf("%w: XOR set record of %d members, self %d", snapshot.ErrCorrupt, len(r.Members), r.Self)
	}
	owner := map[int]string{}
	nodes := map[string]bool{}
	for _, m := range r.Members {
		if err := checkName("node", m.Node); err != nil || nodes[m.Node] {
			return fmt.Errorf("%w: XOR set record: bad or repeated member %q", snapshot.ErrCorrupt, m.Node)
		}
		nodes[m.Node] = true
		for _, f := range m.Files {
			if f.Rank < 0 || f.Size < 0 || checkName("file", f.Name) != nil {
				return fmt.Errorf("%w: XOR set record: member %s: bad file %+v", snapshot.ErrCorrupt, m.Node, f)
			}
			if o, ok := owner[f.Rank]; ok && o != m.Node {
				return fmt.Errorf("%w: XOR set record: rank %d on both %s and %s", snapshot.ErrCorrupt, f.Rank, o, m.Node)
			}
			owner[f.Rank] = m.Node
		}
	}
	return nil
}

// xorSetOf is node's set in nodes cut into sets of k: its members in
// order; nil when node is in no set (too few nodes, or not listed).
func xorSetOf(nodes []string, node string, k int) []string {
	i := slices.Index(nodes, node)
	if k < xor.MinMembers || i < 0 || len(nodes) < xor.MinMembers {
		return nil
	}
	sets := len(nodes) / k
	if len(nodes)%k >= xor.MinMembers {
		sets++
	}
	set := min(i/k, sets-1) // a short last set joins the one before
	start, end := set*k, (set+1)*k
	if set == sets-1 {
		end = len(nodes)
	}
	return nodes[start:end]
}

// memberOf lists this node's data for seq: each rank's snapshot_meta and
// files, by rank, as they sit in the locals.
func memberOf(node string, locals []sstore.Local) (xorMember, []string, error) {
	ls := slices.Clone(locals)
	sort.Slice(ls, func(i, j int) bool { return ls[i].Rank < ls[j].Rank })
	m := xorMember{Node: node}
	var paths []string
	for _, l := range ls {
		meta, err := snapshot.ReadLocal(l.Dir)
		if err != nil {
			return m, nil, err
		}
		names := []string{snapshot.LocalMetaFile}
		for _, f := range meta.Files {
			names = append(names, f.Name)
		}
		for _, n := range names {
			p := filepath.Join(l.Dir, n)
			fi, err := os.Stat(p)
			if err != nil {
				return m, nil, err
			}
			m.Files = append(m.Files, xorFile{Rank: l.Rank, Name: n, Size: fi.Size()})
			paths = append(paths, p)
		}
	}
	return m, paths, nil
}

// concat reads files one after the other as one ReaderAt.
type concat struct {
	files []*os.File
	ends  []int64 // cumulative sizes
}

func openConcat(paths []string, sizes []int64) (*concat, error) {
	c := &concat{}
	var end int64
	for i, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.files = append(c.files, f)
		end += sizes[i]
		c.ends = append(c.ends, end)
	}
	return c, nil
}

func (c *concat) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		i := sort.Search(len(c.ends), func(i int) bool { return c.ends[i] > off })
		if i == len(c.ends) {
			return n, io.EOF
		}
		start := int64(0)
		if i > 0 {
			start = c.ends[i-1]
		}
		want := min(int64(len(p)-n), c.ends[i]-off)
		got, err := c.files[i].ReadAt(p[n:n+int(want)], off-start)
		n += got
		off += int64(got)
		if got < int(want) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the file shrank
			}
			return n, err
		}
	}
	return n, nil
}

func (c *concat) Close() error {
	for _, f := range c.files {
		f.Close()
	}
	return nil
}

// shifted reads a chunk file as if it sat at base in its member's data.
type shifted struct {
	r    io.ReaderAt
	base int64
}

func (s shifted) ReadAt(p []byte, off int64) (int, error) { return s.r.ReadAt(p, off-s.base) }
