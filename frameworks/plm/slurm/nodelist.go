// Package slurm reads a Slurm allocation from the environment Slurm gives
// the programs it starts (salloc, sbatch): the job's nodes from
// SLURM_JOB_NODELIST, in Slurm's compressed host-list form
// (`n[1-3,7],gpu[01-02]`), and the slots of each node from
// SLURM_TASKS_PER_NODE (`2(x3),1`). It is gompirun's resource side under
// Slurm, as Open MPI's ras/slurm is mpirun's (tools/run turns the
// allocation into the job's nodes), and what the slurm PLM component
// (components/plm/slurm), which starts the daemons, knows of Slurm.
//
// The parsers refuse what Slurm never writes and bound what they expand, so
// that a hostile or corrupt list (`n[0-99999999]`) fails with a clear error
// before it fills memory.
package slurm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrSyntax is wrapped by every error about a malformed node list or task
// count list.
var ErrSyntax = errors.New("slurm: malformed list")

// ErrTooMany is wrapped by errors about a list that expands to more than
// MaxNodes entries.
var ErrTooMany = errors.New("slurm: list expands to too many entries")

// MaxNodes bounds the names a node list and the counts a task list may
// expand to: above the largest Slurm clusters (tens of thousands of nodes),
// far below what would exhaust memory.
const MaxNodes = 1 << 16

// maxListLen bounds the text of a list before it is parsed.
const maxListLen = 1 << 20

// ParseNodeList expands a Slurm host list: comma-separated entries, each a
// name in which bracketed range lists (`[1-3,7]`) may appear one or more
// times (`r[1-2]n[01-02]` is r1n01, r1n02, r2n01, r2n02, in that order).
// A range keeps the zero padding of its lower bound (`[08-10]` is 08, 09,
// 10). Names are returned in list order, duplicates kept; each is at most
// 253 bytes of letters, digits, '-', '.' and '_', begins with a letter or
// digit and ends with neither '-' nor '.' (what a host name and a node
// directory allow).
func ParseNodeList(s string) ([]string, error) {
	entries, err := splitEntries(s)
	if err != nil {
		return nil, err
	}
	total := 0
	parsed := make([][]segment, len(entries))
	for i, e := range entries {
		segs, n, err := parseEntry(e)
		if err != nil {
			return nil, err
		}
		if total += n; total > MaxNodes {
			return nil, fmt.Errorf("%w: node list %q has more than %d names", ErrTooMany, abbrev(s), MaxNodes)
		}
		parsed[i] = segs
	}
	out := make([]string, 0, total)
	for _, segs := range parsed {
		out = expand(out, "", segs)
	}
	for _, name := range out {
		if !validName(name) {
			return nil, fmt.Errorf("%w: node list %q: %q is not a node name", ErrSyntax, abbrev(s), name)
		}
	}
	return out, nil
}

// segment is a literal (alts nil) or a bracketed choice of names.
type segment struct {
	lit  string
	alts []rangeSpec
}

// rangeSpec is lo..hi, each printed with at least width digits.
type rangeSpec struct{ lo, hi, width int }

func (r rangeSpec) count() int { return r.hi - r.lo + 1 }

// splitEntries splits s on the commas outside brackets.
func splitEntries(s string) ([]string, error) {
	if len(s) > maxListLen {
		return nil, fmt.Errorf("%w: node list of %d bytes (at most %d)", ErrTooMany, len(s), maxListLen)
	}
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty node list", ErrSyntax)
	}
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			if depth++; depth > 1 {
				return nil, fmt.Errorf("%w: node list %q: nested '[' at byte %d", ErrSyntax, abbrev(s), i)
			}
		case ']':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("%w: node list %q: ']' without '[' at byte %d", ErrSyntax, abbrev(s), i)
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%w: node list %q: '[' not closed", ErrSyntax, abbrev(s))
	}
	return append(out, s[start:]), nil
}

// parseEntry parses one entry and says how many names it expands to.
func parseEntry(e string) ([]segment, int, error) {
	if e == "" {
		return nil, 0, fmt.Errorf("%w: empty entry in node list", ErrSyntax)
	}
	var segs []segment
	n := 1
	for rest := e; rest != ""; {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			segs = append(segs, segment{lit: rest})
			break
		}
		if open > 0 {
			segs = append(segs, segment{lit: rest[:open]})
		}
		end := strings.IndexByte(rest, ']') // splitEntries checked it is there, after open
		alts, c, err := parseRanges(rest[open+1 : end])
		if err != nil {
			return nil, 0, fmt.Errorf("entry %q: %w", abbrev(e), err)
		}
		// Each factor is at most MaxNodes, so the product is checked
		// before it can overflow.
		if n *= c; n > MaxNodes {
			return nil, 0, fmt.Errorf("%w: node list entry %q has more than %d names", ErrTooMany, abbrev(e), MaxNodes)
		}
		segs = append(segs, segment{alts: alts})
		rest = rest[end+1:]
	}
	for _, sg := range segs {
		if sg.alts == nil && !validLiteral(sg.lit) {
			return nil, 0, fmt.Errorf("%w: entry %q: %q is not part of a node name", ErrSyntax, abbrev(e), sg.lit)
		}
	}
	return segs, n, nil
}

// parseRanges parses the inside of brackets: `1-3,7,010-012`.
func parseRanges(s string) ([]rangeSpec, int, error) {
	if s == "" {
		return nil, 0, fmt.Errorf("%w: empty brackets", ErrSyntax)
	}
	var out []rangeSpec
	total := 0
	for _, part := range strings.Split(s, ",") {
		loS, hiS, isRange := strings.Cut(part, "-")
		if !isRange {
			hiS = loS
		}
		lo, err1 := parseIndex(loS)
		hi, err2 := parseIndex(hiS)
		if err := errors.Join(err1, err2); err != nil {
			return nil, 0, fmt.Errorf("range %q: %w", part, err)
		}
		if hi < lo {
			return nil, 0, fmt.Errorf("%w: range %q ends below its start", ErrSyntax, part)
		}
		r := rangeSpec{lo: lo, hi: hi, width: len(loS)}
		if total += r.count(); total > MaxNodes {
			return nil, 0, fmt.Errorf("%w: brackets [%s] hold more than %d names", ErrTooMany, abbrev(s), MaxNodes)
		}
		out = append(out, r)
	}
	return out, total, nil
}

// parseIndex parses one bound: decimal digits only, at most 9 of them.
func parseIndex(s string) (int, error) {
	if s == "" || len(s) > 9 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%w: %q is not a node index (1 to 9 digits)", ErrSyntax, s)
	}
	n, _ := strconv.Atoi(s) // 9 digits always fit
	return n, nil
}

// validLiteral reports whether s can be part of a node name.
func validLiteral(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// validName reports whether name is a whole node name (see ParseNodeList).
func validName(name string) bool {
	if name == "" || len(name) > 253 || !validLiteral(name) {
		return false
	}
	c := name[0]
	if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
		return false
	}
	last := name[len(name)-1]
	return last != '-' && last != '.'
}

// expand appends to out every name prefix+segs makes, in order.
func expand(out []string, prefix string, segs []segment) []string {
	if len(segs) == 0 {
		return append(out, prefix)
	}
	sg := segs[0]
	if sg.alts == nil {
		return expand(out, prefix+sg.lit, segs[1:])
	}
	for _, r := range sg.alts {
		for i := r.lo; i <= r.hi; i++ {
			out = expand(out, fmt.Sprintf("%s%0*d", prefix, r.width, i), segs[1:])
		}
	}
	return out
}

// ParseTasksPerNode expands Slurm's task (or CPU) counts per node:
// comma-separated counts, each optionally repeated as `N(xR)`
// (`2(x3),1` is 2, 2, 2, 1). Every count is at least 1.
func ParseTasksPerNode(s string) ([]int, error) {
	if len(s) > maxListLen {
		return nil, fmt.Errorf("%w: task list of %d bytes (at most %d)", ErrTooMany, len(s), maxListLen)
	}
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty task list", ErrSyntax)
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		countS, rep := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 {
			if !strings.HasPrefix(part[i:], "(x") || !strings.HasSuffix(part, ")") {
				return nil, fmt.Errorf("%w: task list %q: %q is not N or N(xR)", ErrSyntax, abbrev(s), part)
			}
			countS, rep = part[:i], part[i+2:len(part)-1]
		}
		c, err1 := parseIndex(countS)
		r, err2 := parseIndex(rep)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("task list %q: %w", abbrev(s), err)
		}
		if c < 1 || r < 1 {
			return nil, fmt.Errorf("%w: task list %q: %q counts zero", ErrSyntax, abbrev(s), part)
		}
		if len(out)+r > MaxNodes {
			return nil, fmt.Errorf("%w: task list %q has more than %d counts", ErrTooMany, abbrev(s), MaxNodes)
		}
		for range r {
			out = append(out, c)
		}
	}
	return out, nil
}

// abbrev shortens s for an error message.
func abbrev(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
