package snapshot

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Metadata files are lines of `# Key: fields`, as Open MPI's were, so a
// person can read them with cat. Fields are a positional word followed by
// key=value pairs; a word or value with spaces, quotes, '=' or anything
// unprintable is written as a Go-quoted string, so any byte survives a
// round trip and no line can be split by what it holds.

type record struct {
	line   int
	key    string
	pos    string // first positional field ("" if none)
	fields map[string]string
}

func needsQuote(s string) bool {
	if s == "" {
		return true
	}
	for _, r := range s {
		if r == '"' || r == '=' || r == '\\' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
	}
	return false
}

func quote(s string) string {
	if needsQuote(s) {
		return strconv.Quote(s)
	}
	return s
}

// writeRecord writes `# key: pos k=v ...` with kv in the order given.
func writeRecord(w *bufio.Writer, key, pos string, kv ...string) {
	w.WriteString("# ")
	w.WriteString(key)
	w.WriteString(":")
	if pos != "" || len(kv) == 0 {
		w.WriteString(" ")
		w.WriteString(quote(pos))
	}
	for i := 0; i+1 < len(kv); i += 2 {
		w.WriteString(" ")
		w.WriteString(kv[i])
		w.WriteString("=")
		w.WriteString(quote(kv[i+1]))
	}
	w.WriteString("\n")
}

// maxMetaLine bounds a metadata line; Open MPI's reader overflowed its
// buffer on long lines, ours refuses them.
const maxMetaLine = 1 << 20

// MaxMetaSize bounds a metadata file: a reader refuses a larger one before
// reading it (ReadGlobal, ReadLocal) or once past it (ParseGlobal,
// ParseLocal), so a hostile or runaway file cannot make it allocate
// without bound. 64 MiB holds a million ranks' Process records, about 20
// times what any job writes.
const MaxMetaSize = 64 << 20

// errTooLarge is wrapped when a metadata file is past MaxMetaSize.
var errTooLarge = fmt.Errorf("larger than %d MiB, more than any gompi writes: not a metadata file of a snapshot, or damaged", MaxMetaSize>>20)

// scanRecords calls fn with each record of r in order, holding one line
// at a time: what a file makes a parser keep is the parser's to bound.
func scanRecords(r io.Reader, name string, fn func(record) error) error {
	lr := &io.LimitedReader{R: r, N: MaxMetaSize + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 4096), maxMetaLine)
	n := 0
	for sc.Scan() {
		n++
		text := sc.Text()
		if strings.TrimSpace(text) == "" {
			continue
		}
		rec, err := parseRecord(text)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, n, err)
		}
		rec.line = n
		if err := fn(rec); err != nil {
			return err
		}
	}
	if lr.N <= 0 {
		return fmt.Errorf("%s: %w", name, errTooLarge)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s:%d: %w", name, n+1, err)
	}
	return nil
}

func parseRecord(text string) (record, error) {
	if !utf8.ValidString(text) {
		return record{}, fmt.Errorf("not valid UTF-8")
	}
	rest, ok := strings.CutPrefix(text, "# ")
	if !ok {
		return record{}, fmt.Errorf("line does not start with \"# \": %q", clip(text))
	}
	key, rest, ok := strings.Cut(rest, ":")
	if !ok || key == "" {
		return record{}, fmt.Errorf("no \"Key:\" in %q", clip(text))
	}
	rec := record{key: key, fields: map[string]string{}}
	first := true
	for {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			break
		}
		var tok string
		var err error
		if tok, rest, err = nextToken(rest); err != nil {
			return record{}, fmt.Errorf("%s: %w", key, err)
		}
		if k, v, isKV := strings.Cut(tok, "="); isKV && !strings.HasPrefix(tok, "\"") {
			if strings.HasPrefix(v, "\"") {
				uq, err := strconv.Unquote(v)
				if err != nil {
					return record{}, fmt.Errorf("%s: bad quoted value of %s", key, k)
				}
				v = uq
			}
			if _, dup := rec.fields[k]; dup {
				return record{}, fmt.Errorf("%s: field %s given twice", key, k)
			}
			rec.fields[k] = v
			first = false
			continue
		}
		if !first {
			return record{}, fmt.Errorf("%s: stray word %q", key, clip(tok))
		}
		if strings.HasPrefix(tok, "\"") {
			uq, err := strconv.Unquote(tok)
			if err != nil {
				return record{}, fmt.Errorf("%s: bad quoted string", key)
			}
			tok = uq
		}
		rec.pos = tok
		first = false
	}
	return rec, nil
}

// nextToken splits off a bare word, a quoted string, or key=value where the
// value may be quoted.
func nextToken(s string) (tok, rest string, err error) {
	if strings.HasPrefix(s, "\"") {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return "", "", fmt.Errorf("unterminated quoted string")
		}
		return q, s[len(q):], nil
	}
	i := strings.IndexAny(s, " \"")
	if i < 0 {
		return s, "", nil
	}
	if s[i] == '"' { // key="quoted value"
		if i == 0 || s[i-1] != '=' {
			return "", "", fmt.Errorf("quote inside a word")
		}
		q, err := strconv.QuotedPrefix(s[i:])
		if err != nil {
			return "", "", fmt.Errorf("unterminated quoted string")
		}
		return s[:i] + q, s[i+len(q):], nil
	}
	return s[:i], s[i:], nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

func (r record) need(k string) (string, error) {
	v, ok := r.fields[k]
	if !ok {
		return "", fmt.Errorf("line %d: %s: missing %s=", r.line, r.key, k)
	}
	return v, nil
}

func (r record) atoi(s, what string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("line %d: %s: %s %q is not a non-negative number", r.line, r.key, what, s)
	}
	return n, nil
}
