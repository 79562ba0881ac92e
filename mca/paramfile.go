package mca

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Entry is one `name = value` line of a parameter file.
type Entry struct {
	Name  string
	Value string
	Line  int
}

// ParseError says which file and line of a parameter file is malformed.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// maxParamLine bounds one line of a parameter file; Open MPI's parser had a
// fixed buffer that silently split long lines, we refuse them instead.
const maxParamLine = 64 << 10

// MaxParamFileSize bounds a parameter file (mca-params.conf, an AMCA set,
// config.yaml): what is read back is capped before it is held, so a wrong
// or hostile file (a log named by mistake, /dev/zero) is refused instead
// of filling memory.
const MaxParamFileSize = 16 << 20

// ParseParamFile reads Open MPI's mca-params.conf syntax: one `name = value`
// per line, blank lines and lines starting with `#` or `//` ignored, `name =`
// setting an empty value. The value is the rest of the line with the
// surrounding white space trimmed and is otherwise kept verbatim (a `#` inside
// a value is part of it). A name may be given more than once: the last wins,
// as in Open MPI. file only labels errors.
func ParseParamFile(r io.Reader, file string) ([]Entry, error) {
	lr := &io.LimitedReader{R: r, N: MaxParamFileSize + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 4096), maxParamLine)
	var out []Entry
	line := 0
	for sc.Scan() {
		line++
		raw := sc.Bytes()
		if line == 1 {
			raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")) // a UTF-8 BOM from some editors
		}
		if !utf8.Valid(raw) {
			return nil, &ParseError{file, line, "not valid UTF-8 text"}
		}
		trimmed := bytes.TrimSpace(raw)
		if len(trimmed) == 0 || bytes.HasPrefix(trimmed, []byte("#")) || bytes.HasPrefix(trimmed, []byte("//")) {
			continue // a comment or blank line costs no allocation
		}
		text := string(trimmed)
		eq := strings.IndexByte(text, '=')
		if eq < 0 {
			return nil, &ParseError{file, line, fmt.Sprintf("%q has no '=': write `name = value` (or `name =` for an empty value)", clip(text))}
		}
		name := strings.TrimSpace(text[:eq])
		if name == "" {
			return nil, &ParseError{file, line, "missing parameter name before '='"}
		}
		if bad := strings.IndexFunc(name, func(c rune) bool { return !isNameChar(c) }); bad >= 0 {
			return nil, &ParseError{file, line, fmt.Sprintf("parameter name %q has the character %q; names use letters, digits, '_', '-' and '.'", clip(name), name[bad:bad+utf8.RuneLen(rune(name[bad]))])}
		}
		out = append(out, Entry{Name: name, Value: strings.TrimSpace(text[eq+1:]), Line: line})
	}
	if lr.N <= 0 {
		return nil, &ParseError{file, line, fmt.Sprintf("larger than %d MiB, far more than any parameter file: is it the file you meant?", MaxParamFileSize>>20)}
	}
	if err := sc.Err(); err != nil {
		if err == bufio.ErrTooLong {
			return nil, &ParseError{file, line + 1, fmt.Sprintf("line longer than %d bytes", maxParamLine)}
		}
		return nil, fmt.Errorf("%s: read: %w", file, err)
	}
	return out, nil
}

func isNameChar(c rune) bool {
	return c == '_' || c == '-' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
