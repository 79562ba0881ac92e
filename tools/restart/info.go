package restart

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"gompi/frameworks/crs"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// Info explains a snapshot reference: what gompi-restart -i prints.
type Info struct {
	Ref    string        `json:"ref"`
	Dir    string        `json:"dir"`
	Job    string        `json:"job"`
	Ranks  int           `json:"ranks"`
	AMCA   []string      `json:"amca,omitempty"`
	Launch LaunchInfo    `json:"launch"`
	Params []mca.Setting `json:"params,omitempty"`
	// Restart is the sequence gompi-restart uses without -s (-1: none).
	Restart int       `json:"restart"`
	Seqs    []SeqInfo `json:"seqs"`
}

// LaunchInfo is the job's launch (a crs.Launch in the metadata) as -i
// shows it: the program apart from its arguments, under the JSON names
// --json has always printed (scripts read them).
type LaunchInfo struct {
	Program string   `json:"program"`
	Args    []string `json:"args,omitempty"`
	Cwd     string   `json:"cwd,omitempty"`
	Env     []string `json:"env,omitempty"` // NAME=value pairs given with -x
}

// launchInfo is the view of l; the zero view when it records no program.
func launchInfo(l crs.Launch) LaunchInfo {
	v := LaunchInfo{Cwd: l.Dir, Env: l.Env}
	if len(l.Argv) > 0 {
		v.Program = l.Argv[0]
	}
	if len(l.Argv) > 1 {
		v.Args = l.Argv[1:]
	}
	return v
}

// SeqInfo is one sequence.
type SeqInfo struct {
	Seq       int        `json:"seq"`
	Committed bool       `json:"committed"`
	Migrate   bool       `json:"migrate,omitempty"`
	Started   time.Time  `json:"started"`
	Finished  *time.Time `json:"finished,omitempty"`
	Procs     []ProcInfo `json:"procs,omitempty"`
}

// ProcInfo is one rank's local snapshot of a sequence.
type ProcInfo struct {
	Rank  int                   `json:"rank"`
	Node  string                `json:"node"`
	CRS   string                `json:"crs"`
	Files []snapshot.FileRecord `json:"files,omitempty"`
	// Location is where global storage holds it.
	Location string `json:"location"`
	// Cached is the node-local copy sstore stage keeps of it on its node,
	// when this machine can see one ("" = none seen).
	Cached string `json:"cached,omitempty"`
	// Error says why its snapshot_meta could not be read.
	Error string `json:"error,omitempty"`
}

// Explain reads what a reference holds. The local metadata of each
// committed sequence is read (through ms, wherever the reference lives)
// for its files; a damaged one is reported in place, not as an error
// (that is what -i is for). cached says where a rank's node keeps a local
// copy, if any (nil: none looked for).
func Explain(ctx context.Context, ref snapshot.Ref, g *snapshot.GlobalMeta, ms snapshot.MetaStore, cached func(node string, seq, rank int) (string, bool)) Info {
	in := Info{Ref: ref.Name, Dir: ref.Dir, Job: g.Job, Ranks: g.Ranks, AMCA: g.AMCA, Launch: launchInfo(g.Launch), Params: g.Params, Restart: -1}
	if c := g.Committed(); len(c) > 0 {
		in.Restart = c[len(c)-1]
	}
	seqs := append([]snapshot.SeqRecord(nil), g.Seqs...)
	sort.Slice(seqs, func(i, j int) bool { return seqs[i].Seq < seqs[j].Seq })
	for _, s := range seqs {
		si := SeqInfo{Seq: s.Seq, Committed: s.Committed, Migrate: s.Migrate, Started: s.Started.UTC()}
		if s.Committed {
			f := s.Finished.UTC()
			si.Finished = &f
		}
		for _, p := range s.Procs {
			pi := ProcInfo{Rank: p.Rank, Node: p.Node, CRS: p.CRS}
			if loc, err := ref.GlobalLocal(s.Seq, p.Rank); err == nil {
				pi.Location = loc.String()
			}
			if cached != nil {
				if dir, ok := cached(p.Node, s.Seq, p.Rank); ok {
					pi.Cached = dir
				}
			}
			if l, err := ms.ReadLocal(ctx, ref, s.Seq, p.Rank); err != nil {
				pi.Error = err.Error()
			} else {
				pi.Files = l.Files
			}
			si.Procs = append(si.Procs, pi)
		}
		in.Seqs = append(in.Seqs, si)
	}
	return in
}

const timeFormat = "2006-01-02 15:04:05.000 UTC"

// Render prints the reference for people. With only >= 0, only that
// sequence is listed.
func (in Info) Render(w io.Writer, only int, verbose bool) error {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("Snapshot Ref.: %s\n", in.Ref)
	p("Location     : %s\n", in.Dir)
	p("Job          : %s\n", in.Job)
	p("Ranks        : %d\n", in.Ranks)
	if len(in.AMCA) > 0 {
		p("AMCA         : %s\n", strings.Join(in.AMCA, ","))
	}
	if in.Launch.Program != "" {
		p("Program      : %s\n", strings.Join(append([]string{in.Launch.Program}, quoteArgs(in.Launch.Args)...), " "))
		if in.Launch.Cwd != "" {
			p("Working Dir  : %s\n", in.Launch.Cwd)
		}
		for _, e := range in.Launch.Env {
			p("Export       : %s\n", e)
		}
	}
	if len(in.Params) > 0 {
		p("Parameters   : %d set, not defaults\n", len(in.Params))
		width := 0
		for _, s := range in.Params {
			width = max(width, len(s.Name)+3+len(s.Value))
		}
		for _, s := range in.Params {
			kv := s.Name + " = " + s.Value
			p("\t%-*s  # %s\n", width, kv, s.Origin)
		}
	}
	committed := 0
	for _, s := range in.Seqs {
		if s.Committed && !s.Migrate {
			committed++
		}
	}
	switch {
	case in.Restart >= 0:
		p("Sequences: %d (%d committed; gompi-restart uses %d unless -s names another)\n", len(in.Seqs), committed, in.Restart)
	default:
		p("Sequences: %d (none committed: this reference cannot be restarted)\n", len(in.Seqs))
	}
	for _, s := range in.Seqs {
		if only >= 0 && s.Seq != only {
			continue
		}
		switch {
		case s.Migrate && s.Committed:
			p("Seq: %d\tmigration of %s (not a restart point)\n", s.Seq, rankList(s.Procs))
		case s.Migrate:
			p("Seq: %d\tmigration, not committed (it did not finish; not a restart point)\n", s.Seq)
		case s.Committed:
			p("Seq: %d\tcommitted\n", s.Seq)
		default:
			p("Seq: %d\tnot committed (its checkpoint did not finish; restart skips it)\n", s.Seq)
		}
		p("\tBegin Timestamp: %s\n", s.Started.Format(timeFormat))
		if s.Finished != nil {
			p("\tEnd Timestamp  : %s\n", s.Finished.Format(timeFormat))
		}
		if !s.Committed {
			continue
		}
		if s.Migrate {
			// A migration saves only the ranks it moves.
			p("\tProcesses: %d of %d (the ranks it moved)\n", len(s.Procs), in.Ranks)
		} else {
			p("\tProcesses: %d\n", len(s.Procs))
		}
		for _, pr := range s.Procs {
			p("\t\tProcess: %d \t Node: %s \t CRS: %s\n", pr.Rank, pr.Node, pr.CRS)
			if verbose && pr.Location != "" {
				p("\t\t\tLocation: %s\n", pr.Location)
			}
			if pr.Cached != "" {
				p("\t\t\tCached on node %s: %s\n", pr.Node, pr.Cached)
			}
			if pr.Error != "" {
				p("\t\t\tcannot read its snapshot: %s\n", pr.Error)
				continue
			}
			for _, f := range pr.Files {
				line := fmt.Sprintf("\t\t\t%s \t %d bytes", f.Name, f.Size)
				if verbose {
					line += " \t " + f.Checksum
				}
				if f.Compression != "" {
					line += fmt.Sprintf(" \t stored %s as %s", f.Compression, f.Stored)
				}
				p("%s\n", line)
			}
		}
	}
	return nil
}

// rankList names the ranks of procs: "rank 3", "ranks 1, 2".
func rankList(procs []ProcInfo) string {
	if len(procs) == 1 {
		return fmt.Sprintf("rank %d", procs[0].Rank)
	}
	rs := make([]string, len(procs))
	for i, pr := range procs {
		rs[i] = fmt.Sprint(pr.Rank)
	}
	return "ranks " + strings.Join(rs, ", ")
}

// quoteArgs quotes arguments a shell would split.
func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = shellQuote(a)
	}
	return out
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=+./:,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
