package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
)

// ErrBusy is wrapped when a sequence cannot be removed because it is the
// only restart point left, or a checkpoint in progress uses it.
var ErrBusy = errors.New("sequence must stay")

// Prunable says which sequences of g may go so that only the newest keep
// restart points stay (keep <= 0 keeps them all): the older restart
// points, the committed migrations older than the oldest restart point
// kept (they served their move and restart from nothing), and every
// sequence never committed (a failed checkpoint's leftovers). A sequence
// in busy (one a checkpoint in progress writes, one a restart reads) and
// the newest restart point never go. The result is sorted.
func (g *GlobalMeta) Prunable(keep int, busy ...int) []int {
	points := g.Committed()
	oldestKept := -1 // every committed migration is kept while keep <= 0
	if keep > 0 && len(points) > 0 {
		oldestKept = points[max(0, len(points)-keep)]
	}
	newest := -1
	if len(points) > 0 {
		newest = points[len(points)-1]
	}
	var out []int
	for _, s := range g.Seqs {
		var goes bool
		switch {
		case slices.Contains(busy, s.Seq) || s.Seq == newest:
		case !s.Committed:
			goes = true
		default: // a restart point or a committed migration
			goes = s.Seq < oldestKept
		}
		if goes {
			out = append(out, s.Seq)
		}
	}
	slices.Sort(out)
	return out
}

// CanRemove says why seq may not be removed from g by itself (nil when it
// may): it must be recorded, not in busy, and not the only restart point.
func (g *GlobalMeta) CanRemove(seq int, busy ...int) error {
	if _, ok := g.Seq(seq); !ok {
		return fmt.Errorf("sstore: no sequence %d in this reference; its sequences: %s: %w", seq, joinInts(g.seqNumbers()), fs.ErrNotExist)
	}
	if slices.Contains(busy, seq) {
		return fmt.Errorf("sstore: sequence %d is in use by a checkpoint or restart: %w", seq, ErrBusy)
	}
	if points := g.Committed(); len(points) == 1 && points[0] == seq {
		return fmt.Errorf("sstore: sequence %d is the only restart point of this reference: %w", seq, ErrBusy)
	}
	return nil
}

func (g *GlobalMeta) seqNumbers() []int {
	out := make([]int, len(g.Seqs))
	for i, s := range g.Seqs {
		out[i] = s.Seq
	}
	return out
}

// Without returns a copy of g without the records of seqs.
func (g *GlobalMeta) Without(seqs []int) *GlobalMeta {
	c := *g
	c.Seqs = nil
	for _, s := range g.Seqs {
		if !slices.Contains(seqs, s.Seq) {
			c.Seqs = append(c.Seqs, s)
		}
	}
	return &c
}

// Orphans lists the sequence folders of a reference on this node that g
// does not record, sorted: what a crash between the metadata's rewrite and
// the folder's removal left, since a checkpoint records its sequence
// before anything is written into it. Folders from NextSeq on are not
// listed: a checkpoint recorded after g was read may be writing them.
func Orphans(ref Ref, g *GlobalMeta) ([]int, error) {
	entries, err := os.ReadDir(ref.Path())
	if err != nil {
		return nil, fmt.Errorf("sstore: %w", err)
	}
	next := g.NextSeq()
	var out []int
	for _, e := range entries {
		seq, err := strconv.Atoi(e.Name())
		if err != nil || seq < 0 || strconv.Itoa(seq) != e.Name() || seq >= next {
			continue
		}
		if _, ok := g.Seq(seq); !ok {
			out = append(out, seq)
		}
	}
	slices.Sort(out)
	return out, nil
}

// RemoveSeqs removes seqs from a reference on this node: first their
// records, in one atomic rewrite of the metadata (a crash after it leaves
// folders Orphans finds, never a record of a removed sequence), then
// their folders. A sequence folder that is a symbolic link loses the link,
// never what it points to: os.RemoveAll follows no link. g is the
// metadata as read; the caller has checked the reference is its own
// (CheckSafe) and chosen seqs (Prunable, CanRemove, Orphans).
func RemoveSeqs(ref Ref, g *GlobalMeta, seqs []int) error {
	_, err := RemoveSeqsKept(ref, g, seqs)
	return err
}

// Kept is a sequence whose folder a removal kept although its record went:
// the files of sequences By (which stay) are stored as blocks, some of
// them in its packs (differential checkpoints). It stops being a restart
// point; its folder goes with the last sequence that references it, at a
// later removal or prune.
type Kept struct {
	Seq int   `json:"seq"`
	By  []int `json:"by"`
}

func (k Kept) String() string {
	return fmt.Sprintf("sequence %d's folder (sequences %s store blocks in it)", k.Seq, joinInts(k.By))
}

// RemoveSeqsKept is RemoveSeqs keeping the folders of the sequences whose
// blocks the sequences that stay reference, which it returns.
func RemoveSeqsKept(ref Ref, g *GlobalMeta, seqs []int) ([]Kept, error) {
	if err := RefIsFolder(ref); err != nil {
		return nil, err
	}
	kept := KeptBlocks(ref, g, seqs)
	recorded := slices.ContainsFunc(seqs, func(s int) bool { _, ok := g.Seq(s); return ok })
	if recorded {
		if err := WriteGlobal(ref, g.Without(seqs)); err != nil {
			return nil, err
		}
	}
	var errs []error
	for _, seq := range seqs {
		if slices.ContainsFunc(kept, func(k Kept) bool { return k.Seq == seq }) {
			continue
		}
		if err := os.RemoveAll(ref.SeqDir(seq)); err != nil {
			errs = append(errs, fmt.Errorf("sstore: remove sequence %d: %w", seq, err))
		}
	}
	return kept, errors.Join(errs...)
}

// KeptBlocks says which of seqs a removal from the reference on this node
// must keep the folder of: those whose packs hold blocks of the sequences
// g records that stay (their snapshot_meta's From fields). References are
// flat, each naming the sequence that stores the block, so the sequences
// that stay are all there is to read.
func KeptBlocks(ref Ref, g *GlobalMeta, seqs []int) []Kept {
	if len(seqs) == 0 {
		return nil
	}
	by := referencedBy(ref, g.Without(seqs))
	var out []Kept
	for _, s := range seqs {
		if len(by[s]) > 0 {
			out = append(out, Kept{Seq: s, By: by[s]})
		}
	}
	slices.SortFunc(out, func(a, b Kept) int { return a.Seq - b.Seq })
	return out
}

// referencedBy maps each sequence whose packs the sequences of g
// reference to those sequences, increasing. A rank's snapshot_meta that
// cannot be read references nothing: that sequence cannot be restarted
// anyway.
func referencedBy(ref Ref, g *GlobalMeta) map[int][]int {
	by := map[int][]int{}
	for _, s := range g.Seqs {
		for _, p := range s.Procs {
			l, err := ReadLocal(ref.LocalPath(s.Seq, p.Rank))
			if err != nil {
				continue
			}
			for _, f := range l.Files {
				from, _ := ParseSeqs(f.From) // ParseLocal checked it
				for _, from := range from {
					if !slices.Contains(by[from], s.Seq) {
						by[from] = append(by[from], s.Seq)
					}
				}
			}
		}
	}
	for _, v := range by {
		slices.Sort(v)
	}
	return by
}

// RefIsFolder refuses, wrapping ErrUnsafeRef, a reference whose own folder
// is a symbolic link: removing inside it would act on another folder than
// the one named.
func RefIsFolder(ref Ref) error {
	fi, err := os.Lstat(ref.Path())
	if err != nil {
		return fmt.Errorf("sstore: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("sstore: %w: %s is not a folder (a symbolic link?): give the folder it names", ErrUnsafeRef, ref.Path())
	}
	return nil
}

// Removal is a removal of sequences from a reference: one sequence
// (Seq >= 0) or a prune down to the newest Keep restart points (Seq < 0;
// Keep <= 0 keeps them all and takes only failed leftovers).
type Removal struct {
	Seq  int
	Keep int
}

// Plan says which sequences r takes from the reference on this node whose
// metadata is g: Seq, when CanRemove allows it; or Prunable's choice and
// the Orphans a crash left. busy are the sequences in use.
func (r Removal) Plan(ref Ref, g *GlobalMeta, busy ...int) ([]int, error) {
	if r.Seq >= 0 {
		if err := g.CanRemove(r.Seq, busy...); err != nil {
			return nil, err
		}
		return []int{r.Seq}, nil
	}
	orphans, err := Orphans(ref, g)
	if err != nil {
		return nil, err
	}
	// An orphan a recorded sequence stores blocks in is a kept folder, not
	// a leftover: it goes once nothing references it.
	if len(orphans) > 0 {
		by := referencedBy(ref, g)
		orphans = slices.DeleteFunc(orphans, func(s int) bool { return len(by[s]) > 0 })
	}
	out := append(g.Prunable(r.Keep, busy...), orphans...)
	slices.Sort(out)
	return out, nil
}
