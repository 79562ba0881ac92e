package snapshot

import (
	"bufio"
	"fmt"
	"path/filepath"
	"strings"
)

// Launch is how the job's ranks were started: what gompi-restart runs
// again, so a reference alone is enough to restart (Open MPI's restart
// hard-coded its launch instead). It is stored in the global metadata as
//
//	# Program: /abs/path/prog cwd=/work/dir
//	# Arg: first argument
//	# Export: NAME=value          (each -x of the original gompirun)
type Launch struct {
	Program string   `json:"program"`
	Args    []string `json:"args,omitempty"`
	Cwd     string   `json:"cwd,omitempty"`
	Env     []string `json:"env,omitempty"` // NAME=value pairs given with -x
}

// encode writes the launch records; nothing when no program is recorded.
func (l Launch) encode(b *bufio.Writer) {
	if l.Program == "" {
		return
	}
	if l.Cwd != "" {
		writeRecord(b, "Program", l.Program, "cwd", l.Cwd)
	} else {
		writeRecord(b, "Program", l.Program)
	}
	for _, a := range l.Args {
		writeRecord(b, "Arg", a)
	}
	for _, e := range l.Env {
		writeRecord(b, "Export", e)
	}
}

// parseRecord adds one launch record. A program must be an absolute path
// (gompirun records the resolved one); arguments and exports come after it.
func (l *Launch) parseRecord(rec record) error {
	switch rec.key {
	case "Program":
		if l.Program != "" {
			return fmt.Errorf("Program recorded twice")
		}
		if !filepath.IsAbs(rec.pos) {
			return fmt.Errorf("Program %q is not an absolute path", rec.pos)
		}
		if cwd, ok := rec.fields["cwd"]; ok && !filepath.IsAbs(cwd) {
			return fmt.Errorf("Program cwd %q is not an absolute path", cwd)
		}
		l.Program, l.Cwd = rec.pos, rec.fields["cwd"]
	case "Arg":
		if l.Program == "" {
			return fmt.Errorf("Arg before Program")
		}
		l.Args = append(l.Args, rec.pos)
	case "Export":
		if l.Program == "" {
			return fmt.Errorf("Export before Program")
		}
		if k, _, ok := strings.Cut(rec.pos, "="); !ok || k == "" {
			return fmt.Errorf("Export %q is not NAME=value", rec.pos)
		}
		l.Env = append(l.Env, rec.pos)
	}
	return nil
}
