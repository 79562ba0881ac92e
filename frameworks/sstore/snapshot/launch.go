package snapshot

import (
	"bufio"
	"fmt"
	"path/filepath"
	"strings"

	"gompi/frameworks/crs"
)

// The job's launch (crs.Launch: what gompi-restart runs again, so a
// reference alone is enough to restart; Open MPI's restart hard-coded its
// launch instead) is stored in the global metadata as
//
//	# Program: /abs/path/prog cwd=/work/dir     (Argv[0], Dir)
//	# Arg: first argument                       (each of Argv[1:])
//	# Export: NAME=value                        (each of Env: the -x of the original gompirun)
//
// The records predate crs.Launch (they were written from a Launch of this
// package's own); the format is unchanged, so older references still read.

// encodeLaunch writes the launch records; nothing when no program is
// recorded.
func encodeLaunch(b *bufio.Writer, l crs.Launch) {
	if len(l.Argv) == 0 || l.Argv[0] == "" {
		return
	}
	if l.Dir != "" {
		writeRecord(b, "Program", l.Argv[0], "cwd", l.Dir)
	} else {
		writeRecord(b, "Program", l.Argv[0])
	}
	for _, a := range l.Argv[1:] {
		writeRecord(b, "Arg", a)
	}
	for _, e := range l.Env {
		writeRecord(b, "Export", e)
	}
}

// parseLaunchRecord adds one launch record to l. A program must be an
// absolute path (gompirun records the resolved one); arguments and
// exports come after it.
func parseLaunchRecord(l *crs.Launch, rec record) error {
	switch rec.key {
	case "Program":
		if len(l.Argv) > 0 {
			return fmt.Errorf("Program recorded twice")
		}
		if !filepath.IsAbs(rec.pos) {
			return fmt.Errorf("Program %q is not an absolute path", rec.pos)
		}
		if cwd, ok := rec.fields["cwd"]; ok && !filepath.IsAbs(cwd) {
			return fmt.Errorf("Program cwd %q is not an absolute path", cwd)
		}
		l.Argv, l.Dir = []string{rec.pos}, rec.fields["cwd"]
	case "Arg":
		if len(l.Argv) == 0 {
			return fmt.Errorf("Arg before Program")
		}
		l.Argv = append(l.Argv, rec.pos)
	case "Export":
		if len(l.Argv) == 0 {
			return fmt.Errorf("Export before Program")
		}
		if k, _, ok := strings.Cut(rec.pos, "="); !ok || k == "" {
			return fmt.Errorf("Export %q is not NAME=value", rec.pos)
		}
		l.Env = append(l.Env, rec.pos)
	}
	return nil
}
