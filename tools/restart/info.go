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
	// Checked says what was checked of each restart point's files.
	Checked string `json:"checked"`
	// Restart is the newest sequence that passes gompi-restart's checks,
	// the one to restart from (-1: none). When it is not Newest,
	// gompi-restart refuses to run without -s Restart.
	Restart int `json:"restart"`
	// Newest is the newest committed restart point, the one gompi-restart
	// takes without -s (-1: none).
	Newest int       `json:"newest"`
	Seqs   []SeqInfo `json:"seqs"`
}

// A sequence's Status.
const (
	StatusOK      = "ok"      // gompi-restart accepts it
	StatusRefused = "refused" // gompi-restart refuses it; Refused says why
)

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
	// Status is StatusOK or StatusRefused, and Refused why: not a restart
	// point, or what the checks found wrong.
	Status  string     `json:"status"`
	Refused string     `json:"refused,omitempty"`
	Procs   []ProcInfo `json:"procs,omitempty"`
	// Ranks is the job's rank count when the sequence was taken; a
	// repartition sequence (gompi-restart -np) says which it was made
	// from.
	Ranks         int  `json:"ranks"`
	RepartitionOf *int `json:"repartition_of,omitempty"`
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
// copy, if any (nil: none looked for). check runs on each restart point
// the checks gompi-restart runs before restarting it (nil: only that each
// rank's metadata was read, as for a remote reference); what it returns
// marks the sequence refused.
func Explain(ctx context.Context, ref snapshot.Ref, g *snapshot.GlobalMeta, ms snapshot.MetaStore, cached func(node string, seq, rank int) (string, bool), check func(snapshot.RestartPoint) error) Info {
	in := Info{Ref: ref.Name, Dir: ref.Dir, Job: g.Job, Ranks: g.Ranks, AMCA: g.AMCA, Launch: launchInfo(g.Launch), Params: g.Params, Restart: -1, Newest: -1}
	if c := g.Committed(); len(c) > 0 {
		in.Newest = c[len(c)-1]
	}
	seqs := append([]snapshot.SeqRecord(nil), g.Seqs...)
	sort.Slice(seqs, func(i, j int) bool { return seqs[i].Seq < seqs[j].Seq })
	for _, s := range seqs {
		si := explainSeq(ctx, ref, s, ms, cached)
		si.Ranks = g.SeqRanks(s)
		if s.Repartition {
			si.RepartitionOf = &s.FromSeq
		}
		if s.IsRestartPoint() {
			refused := procsError(si.Procs)
			if refused == nil && check != nil {
				refused = check(snapshot.RestartPoint{Ref: ref, Meta: g, Seq: s})
			}
			if refused != nil {
				si.Status, si.Refused = StatusRefused, refused.Error()
			} else {
				in.Restart = s.Seq
			}
		}
		in.Seqs = append(in.Seqs, si)
	}
	return in
}

// explainSeq is sequence s of ref as Explain shows it, marked refused
// unless it is a restart point (Explain checks those).
func explainSeq(ctx context.Context, ref snapshot.Ref, s snapshot.SeqRecord, ms snapshot.MetaStore, cached func(node string, seq, rank int) (string, bool)) SeqInfo {
	si := SeqInfo{Seq: s.Seq, Committed: s.Committed, Migrate: s.Migrate, Started: s.Started.UTC(), Status: StatusOK}
	if why := s.NotRestartPoint(); why != "" {
		si.Status, si.Refused = StatusRefused, why
	}
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
	return si
}

// procsError is why a restart point whose ranks' metadata could not be
// read is refused (nil: every one was read).
func procsError(procs []ProcInfo) error {
	for _, p := range procs {
		if p.Error != "" {
			return fmt.Errorf("rank %d: %s", p.Rank, p.Error)
		}
	}
	return nil
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
	in.renderSummary(p)
	for _, s := range in.Seqs {
		if only >= 0 && s.Seq != only {
			continue
		}
		switch {
		case s.Migrate && s.Committed:
			p("Seq: %d\tmigration of %s (not a restart point)\n", s.Seq, rankList(s.Procs))
		case s.Migrate:
			p("Seq: %d\tmigration, not committed (it did not finish; not a restart point)\n", s.Seq)
		case s.Committed && s.Status == StatusRefused:
			p("Seq: %d\tcommitted, refused: %s\n", s.Seq, strings.ReplaceAll(s.Refused, "\n", "\n\t\t"))
		case s.Committed:
			p("Seq: %d\tcommitted, ok\n", s.Seq)
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
		if s.RepartitionOf != nil {
			p("\tRepartition of sequence %d for %d ranks (gompi-restart -np)\n", *s.RepartitionOf, s.Ranks)
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
				if f.Compression != "" && f.Filter != "" {
					line += fmt.Sprintf(" \t stored %s after %s as %s", f.Compression, f.Filter, f.Stored)
				} else if f.Compression != "" {
					line += fmt.Sprintf(" \t stored %s as %s", f.Compression, f.Stored)
				}
				p("%s\n", line)
			}
		}
	}
	return nil
}

// renderSummary prints what was checked and the sequences' summary: which
// one gompi-restart uses, or that it refuses the newest, or every one.
func (in Info) renderSummary(p func(format string, a ...any)) {
	committed := 0
	for _, s := range in.Seqs {
		if s.Committed && !s.Migrate {
			committed++
		}
	}
	if in.Newest >= 0 {
		p("Checked      : %s\n", in.Checked)
	}
	switch {
	case in.Restart >= 0 && in.Restart == in.Newest:
		p("Sequences: %d (%d committed; gompi-restart uses %d unless -s names another)\n", len(in.Seqs), committed, in.Restart)
	case in.Restart >= 0:
		p("Sequences: %d (%d committed; gompi-restart refuses the newest, %d; the newest it accepts is %d: gompi-restart -s %d)\n", len(in.Seqs), committed, in.Newest, in.Restart, in.Restart)
	case in.Newest >= 0:
		p("Sequences: %d (%d committed, each refused: this reference cannot be restarted)\n", len(in.Seqs), committed)
	default:
		p("Sequences: %d (none committed: this reference cannot be restarted)\n", len(in.Seqs))
	}
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
