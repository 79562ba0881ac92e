// Package hostfile reads the nodes a job may run on: Open MPI hostfiles
// (`node1 slots=4 max_slots=8`, `#` comments) and --host lists (`a,b:2`).
// A node named twice is one node whose slots add up, as in Open MPI.
package hostfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// ErrSyntax is wrapped by every error about malformed input.
var ErrSyntax = errors.New("hostfile: syntax error")

// Node is one node a job may use.
type Node struct {
	Name string
	// Slots is how many ranks the node takes before it is full.
	Slots int
	// MaxSlots, when non-zero, is a hard limit even with oversubscription.
	MaxSlots int
	// SlotsGiven says the slots were written (not defaulted to 1).
	SlotsGiven bool
}

// A node name is a host name or an IPv4 address; the characters are
// limited because the name also names a directory and a shell word.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9_])?$`)

// maxSlots bounds counts so sums cannot overflow.
const maxSlots = 1 << 20

// maxFileSize bounds a hostfile, so that a wrong or hostile one is refused
// before its nodes fill memory (a million-node hostfile is under 32 MiB).
const maxFileSize = 64 << 20

// ValidName reports whether name can be a node name.
func ValidName(name string) bool { return len(name) <= 253 && nameRE.MatchString(name) }

// Parse reads a hostfile. name is used in error messages ("hosts:3: ...").
// Each line is a node name followed by optional slots=N (also count=N,
// cpu=N) and max_slots=N; text after '#' is a comment.
func Parse(r io.Reader, name string) ([]Node, error) {
	var b builder
	lr := &io.LimitedReader{R: r, N: maxFileSize + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	ln := 0
	for sc.Scan() {
		ln++
		raw := sc.Bytes()
		if i := bytes.IndexByte(raw, '#'); i >= 0 {
			raw = raw[:i]
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue // a comment or blank line costs no allocation
		}
		line := string(raw)
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		n, err := parseLine(fields)
		if err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %q: %w", ErrSyntax, name, ln, strings.TrimSpace(line), err)
		}
		if err := b.add(n); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %w", ErrSyntax, name, ln, err)
		}
	}
	if lr.N <= 0 {
		return nil, fmt.Errorf("%w: %s: larger than %d MiB, far more than any hostfile: is it the file you meant?", ErrSyntax, name, maxFileSize>>20)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hostfile: read %s: %w", name, err)
	}
	if len(b.nodes) == 0 {
		return nil, fmt.Errorf("%w: %s: no nodes (write one node per line: `node1 slots=4`)", ErrSyntax, name)
	}
	return b.nodes, nil
}

// ReadFile parses the hostfile at path.
func ReadFile(path string) ([]Node, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("hostfile: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

func parseLine(fields []string) (Node, error) {
	n := Node{Name: fields[0], Slots: 1}
	if !ValidName(n.Name) {
		return n, fmt.Errorf("%q is not a node name (letters, digits, '.', '-', '_')", n.Name)
	}
	seen := map[string]bool{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return n, fmt.Errorf("%q: want key=value (slots=4, max_slots=8)", f)
		}
		k = strings.ToLower(k)
		switch k {
		case "slots", "count", "cpu", "max_slots", "max-slots":
		default:
			return n, fmt.Errorf("unknown key %q (known: slots, max_slots)", k)
		}
		canon := k
		if k == "count" || k == "cpu" {
			canon = "slots"
		}
		if k == "max-slots" {
			canon = "max_slots"
		}
		if seen[canon] {
			return n, fmt.Errorf("%s given twice", canon)
		}
		seen[canon] = true
		c, err := count(v)
		if err != nil {
			return n, fmt.Errorf("%s: %w", k, err)
		}
		if canon == "slots" {
			n.Slots, n.SlotsGiven = c, true
		} else {
			n.MaxSlots = c
		}
	}
	if n.MaxSlots > 0 && n.Slots > n.MaxSlots {
		if n.SlotsGiven {
			return n, fmt.Errorf("slots=%d is more than max_slots=%d", n.Slots, n.MaxSlots)
		}
		n.Slots = n.MaxSlots
	}
	return n, nil
}

func count(v string) (int, error) {
	c, err := strconv.Atoi(v)
	if err != nil || c < 1 || c > maxSlots {
		return 0, fmt.Errorf("%q is not a count from 1 to %d", v, maxSlots)
	}
	return c, nil
}

// ParseHosts reads a --host list: comma-separated node names, each with
// an optional ":slots" (`a,b:2`). A name without a count has one slot.
func ParseHosts(list string) ([]Node, error) {
	var b builder
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("%w: --host %q: empty node name (write --host a,b:2)", ErrSyntax, list)
		}
		n := Node{Name: item, Slots: 1}
		if name, c, ok := strings.Cut(item, ":"); ok {
			slots, err := count(c)
			if err != nil {
				return nil, fmt.Errorf("%w: --host %q: %s: slots %w", ErrSyntax, list, item, err)
			}
			n = Node{Name: name, Slots: slots, SlotsGiven: true}
		}
		if !ValidName(n.Name) {
			return nil, fmt.Errorf("%w: --host %q: %q is not a node name (letters, digits, '.', '-', '_')", ErrSyntax, list, n.Name)
		}
		if err := b.add(n); err != nil {
			return nil, fmt.Errorf("%w: --host %q: %w", ErrSyntax, list, err)
		}
	}
	return b.nodes, nil
}

// builder merges repeated names, keeping first-seen order.
type builder struct {
	nodes []Node
	index map[string]int
}

func (b *builder) add(n Node) error {
	if b.index == nil {
		b.index = map[string]int{}
	}
	i, ok := b.index[n.Name]
	if !ok {
		b.index[n.Name] = len(b.nodes)
		b.nodes = append(b.nodes, n)
		return nil
	}
	old := &b.nodes[i]
	old.Slots += n.Slots
	if old.Slots > maxSlots {
		return fmt.Errorf("node %s: more than %d slots in all", n.Name, maxSlots)
	}
	old.SlotsGiven = old.SlotsGiven || n.SlotsGiven
	if n.MaxSlots > 0 && (old.MaxSlots == 0 || n.MaxSlots < old.MaxSlots) {
		old.MaxSlots = n.MaxSlots
	}
	if old.MaxSlots > 0 && old.Slots > old.MaxSlots {
		return fmt.Errorf("node %s: %d slots in all is more than max_slots=%d", n.Name, old.Slots, old.MaxSlots)
	}
	return nil
}
