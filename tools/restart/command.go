// Package restart is gompi-restart (also `gompi restart`): it restarts a
// job from its global snapshot reference alone, as Open MPI's ompi-restart
// does. The reference's metadata holds everything: the rank count, the
// parameters and AMCA sets the job ran with, its program, arguments,
// working directory and exports. gompi-restart picks the newest committed
// sequence (or the one -s names, which must be committed), verifies every
// file's size and checksum, and runs gompirun with the same job, each rank
// starting from its local snapshot. The restarted job checkpoints into the
// same reference, numbering on. gompi-restart -i explains a reference,
// each sequence marked with what those checks find (file sizes; with -v
// checksums too) and the newest that passes named as the one to use.
package restart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"gompi/boot"
	"gompi/cli"
	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/compress"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// options are gompi-restart's flags.
type options struct {
	seq        int
	np         int // restart on this many ranks (0: the sequence's count)
	info       bool
	hostfile   string
	fork       bool
	showme     bool
	mpirunOpts string
	verbose    bool
	asJSON     bool
	// allowUnsafe restarts a reference others could have written.
	allowUnsafe bool
	params      *cli.ParamFlags
}

// NewCommand returns the gompi-restart command.
func NewCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "gompi-restart [options] GLOBAL_SNAPSHOT_REF",
		Short: "Restart a gompi job from a checkpoint",
		Long: `gompi-restart restarts the job saved in GLOBAL_SNAPSHOT_REF: the name
gompi-checkpoint printed (looked up in the current folder, then in
snapc_base_global_snapshot_dir, $HOME by default, then in your index of
remote references) or the reference's path, or URL (sftp://host/dir/name). It takes the newest committed sequence, or
the committed one -s names, checks the size and checksum of every file of
it, and runs gompirun again with the job's rank count, program, arguments,
working directory, exports, AMCA sets and parameters, each rank starting
from its own snapshot. -np M restarts it on M ranks instead (see --np).
--mca overrides a stored parameter (a different btl,
for instance); --hostfile places the ranks on other nodes. The restarted
job's checkpoints continue the same reference with the next sequence
numbers. Since it runs what the reference names, it refuses a reference
another user owns or that group or others may write, as ssh does
(--allow-unsafe-ref overrides); gompi writes them for their owner only
(sstore_base_group_readable lets the group read them).`,
		Example: `  gompi-restart gompi_global_snapshot_1a2b3c4d.ckpt
  gompi-restart -s 0 /scratch/gompi_global_snapshot_1a2b3c4d.ckpt
  gompi-restart -np 8 gompi_global_snapshot_1a2b3c4d.ckpt
  gompi-restart --hostfile hosts --mca btl tcp gompi_global_snapshot_1a2b3c4d.ckpt
  gompi-restart -i gompi_global_snapshot_1a2b3c4d.ckpt`,
		Args:    cobra.ExactArgs(1),
		Version: cli.Version(),
	}
	f := cmd.Flags()
	f.IntVarP(&o.seq, "seq", "s", -1, "sequence to restart from (default: the newest committed one)")
	f.IntVar(&o.np, "np", 0, "restart on this many ranks (also -np; default: the sequence's): a program whose state is declared redistributable (cr.ProtectDistributed, ProtectReplicated, ProtectFunc) saved by crs=self; the sequence is first repartitioned into a new one of the reference (--showme too), or the one made before for that count is reused")
	f.BoolVarP(&o.info, "info", "i", false, "explain the reference (job, sequences, ranks, files, parameters), each sequence checked as a restart checks it (file sizes; with -v checksums too), and exit")
	f.StringVar(&o.hostfile, "hostfile", "", "hostfile of the nodes to restart on (default: this machine)")
	f.BoolVar(&o.fork, "fork", false, "run gompirun as a child and wait for it, instead of becoming it")
	f.BoolVar(&o.showme, "showme", false, "print the gompirun command line instead of running it")
	f.StringVar(&o.mpirunOpts, "mpirun_opts", "", "more gompirun options, split on spaces (e.g. \"--tag-output --map-by node\")")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "print more: with -i check and print file checksums, else the gompirun command line before running it")
	f.BoolVar(&o.asJSON, "json", false, "with -i, print the reference as JSON")
	f.BoolVar(&o.allowUnsafe, "allow-unsafe-ref", false, "restart a reference that another user owns or that group or others may write (refused by default: restart runs what its metadata names)")
	f.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "machinefile" {
			name = "hostfile"
		}
		return pflag.NormalizedName(name)
	})
	o.params = cli.AddParamFlags(cmd)
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if o.seq < -1 {
			return cli.Usagef("-s %d: want a sequence number (gompi-restart -i lists them)", o.seq)
		}
		if o.np < 0 || o.np > snapshot.MaxRanks || (o.np > 0 && o.info) {
			return cli.Usagef("-np %d: want a rank count from 1 to %d, and not with -i", o.np, snapshot.MaxRanks)
		}
		if o.asJSON && !o.info {
			return cli.Usagef("--json goes with -i")
		}
		return o.run(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), args[0])
	}
	return cmd
}

// run is gompi-restart's phases: load the parameters, find and read the
// reference (parse), explain it (-i) or choose and verify a sequence
// (verify), and run gompirun (launch). Each phase honours ctx, which
// SIGINT and SIGTERM cancel (cli.Main), and run checks it between phases,
// so a signal ends gompi-restart before its next phase.
func (o *options) run(ctx context.Context, stdout, stderr io.Writer, arg string) error {
	p, err := boot.Load(ctx, boot.Options{Role: mca.RoleTool, Sources: o.params.SourceOptions(), LogOutput: stderr, NoPlugins: true})
	if err != nil {
		return err
	}
	defer p.Close()
	def, _ := snapc.GlobalDir(p.Values) // without one, a bare name not in the current folder fails in FindRef, saying so
	ref, err := snapshot.FindRef(arg, def)
	if err != nil {
		return err
	}
	ms, closeMeta, err := p.MetaStore(ctx, ref)
	if err != nil {
		return err
	}
	defer closeMeta()
	meta, err := ms.ReadGlobal(ctx, ref)
	if err != nil {
		return err
	}
	if o.info {
		return o.explain(ctx, stdout, p.Values, ref, meta, ms)
	}
	point, err := snapshot.ChooseSeq(ref, meta, o.seq)
	if err != nil {
		return fmt.Errorf("%w\n(gompi-restart -i %s explains the reference)", err, arg)
	}
	if ref.IsRemote() {
		// Reading every byte here would move the snapshot twice: each
		// node verifies its ranks' files as it fetches them.
		fmt.Fprintf(stderr, "gompi-restart: %s is remote; each node verifies its ranks' snapshots as it fetches them\n", ref)
	} else if err := o.checkSafe(stderr, point); err != nil {
		return err
	} else if err := acceptNodeCopies(stderr, point, point.VerifyAllWith(verifier(ctx, true))); err != nil {
		return err
	}
	if o.np > 0 {
		if point, err = repartition(ctx, stderr, point, o.np, o.params.MCA); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	gompirun, prefix, err := findGompirun()
	if err != nil {
		return err
	}
	reach, err := reachSettings(p, point)
	if err != nil {
		return err
	}
	known, closeKnown := o.knownParams(ctx, p, point.Meta, stderr)
	defer closeKnown()
	argv, warnings := Command(point, Overrides{MCA: append(reach, o.params.MCA...), AMCA: o.params.AMCA, Hostfile: o.hostfile,
		Extra: strings.Fields(o.mpirunOpts)}, known)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "gompi-restart: warning: %s\n", w)
	}
	argv = append(append([]string{gompirun}, prefix...), argv...)
	if o.showme {
		fmt.Fprintln(stdout, strings.Join(quoteArgs(argv), " "))
		return nil
	}
	if o.verbose {
		fmt.Fprintf(stderr, "gompi-restart: restarting %s from sequence %d:\n  %s\n", ref.Name, point.Seq.Seq, strings.Join(quoteArgs(argv), " "))
	}
	return o.launch(ctx, stdout, stderr, argv)
}

// reachSettings are the name=value pairs that reach the restart point's
// remote reference (boot's RemoteSettings: the FileM its URL implies, the
// settings the user's snapshot index keeps) that its job did not store:
// gompirun and its daemons fetch the snapshots with them, as this tool
// read the metadata.
func reachSettings(p *boot.Process, point snapshot.RestartPoint) ([]string, error) {
	reach, err := p.RemoteSettings(point.Ref)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range reach {
		if !slices.ContainsFunc(point.Meta.Params, func(st mca.Setting) bool { return st.Name == s.Name }) {
			out = append(out, s.Name+"="+s.Value)
		}
	}
	return out, nil
}

// checkSafe refuses a restart point someone else could have written
// (safety), and prints its warnings.
func (o *options) checkSafe(stderr io.Writer, point snapshot.RestartPoint) error {
	warnings, err := o.safety(point)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "gompi-restart: warning: %s\n", w)
	}
	if err != nil {
		return fmt.Errorf("%w\n(gompi-restart --allow-unsafe-ref restarts it anyway, running what its metadata names)", err)
	}
	return nil
}

// safety is snapshot.CheckSafe over the restart point's folders and
// metadata: a point someone else could have written is refused, unless
// --allow-unsafe-ref, which makes that a warning.
func (o *options) safety(point snapshot.RestartPoint) (warnings []string, err error) {
	warning, err := snapshot.CheckSafe(point.Ref, point.SafePaths()...)
	if warning != "" {
		warnings = append(warnings, warning)
	}
	if err != nil && errors.Is(err, snapshot.ErrUnsafeRef) && o.allowUnsafe {
		return append(warnings, fmt.Sprintf("restarting anyway (--allow-unsafe-ref): %v", err)), nil
	}
	return warnings, err
}

// verifier is the check of each rank's snapshot: with sums every file's
// size and checksum (decoding a file stored compressed), as gompi-restart
// checks before it restarts; without, only what needs no reading: each
// file there and of its size.
func verifier(ctx context.Context, sums bool) func(dir string, l *snapshot.LocalMeta) error {
	return func(dir string, l *snapshot.LocalMeta) error {
		if sums {
			return compress.Verify(ctx, dir, l)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return l.VerifySizes(dir)
	}
}

// explain prints what the reference holds (-i), with the node-local copies
// this machine can see, each restart point marked with what gompi-restart
// would find wrong with it: its safety and its files' sizes, with -v their
// checksums too. A remote reference's files are not read here (each node
// checks its ranks' as it fetches them), only its metadata.
func (o *options) explain(ctx context.Context, stdout io.Writer, vals *mca.Values, ref snapshot.Ref, meta *snapshot.GlobalMeta, ms snapshot.MetaStore) error {
	root := vals.String(snapshot.ParamStageRoot)
	for _, s := range meta.Params { // where the job kept its copies
		if s.Name == snapshot.ParamStageRoot {
			root = s.Value
		}
	}
	checked, check := "file sizes (-v checks their checksums too, as gompi-restart does)", func(point snapshot.RestartPoint) error {
		if _, err := o.safety(point); err != nil {
			return err
		}
		return point.Check(verifier(ctx, o.verbose))
	}
	switch {
	case ref.IsRemote():
		checked, check = "snapshot metadata only: the reference is remote, and each node checks its ranks' files as it fetches them", nil
	case o.verbose:
		checked = "file sizes and checksums"
	}
	in := Explain(ctx, ref, meta, ms, func(node string, seq, rank int) (string, bool) {
		return snapshot.StagedCopy(root, node, ref, seq, rank)
	}, check)
	in.Checked = checked
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.seq >= 0 {
		if _, ok := meta.Seq(o.seq); !ok {
			return fmt.Errorf("%s has no sequence %d; it has %s", ref, o.seq, seqList(meta))
		}
	}
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(in)
	}
	return in.Render(stdout, o.seq, o.verbose)
}

// launchGrace is how long gompirun has to end after gompi-restart --fork
// passed it SIGTERM, before it is killed: gompirun's own shutdown of a
// job (ranks, then daemons) takes seconds, not minutes.
const launchGrace = 30 * time.Second

// launch becomes gompirun (argv), or with --fork runs it as a child and
// waits: a signal that cancels ctx is passed on to it as SIGTERM.
func (o *options) launch(ctx context.Context, stdout, stderr io.Writer, argv []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	gompirun := argv[0]
	if !o.fork {
		err := syscall.Exec(gompirun, argv, os.Environ())
		return fmt.Errorf("run %s: %w", gompirun, err)
	}
	cmd := exec.CommandContext(ctx, gompirun, argv[1:]...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = launchGrace
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code := exit.ExitCode()
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			return &cli.ExitError{Code: code}
		}
		return fmt.Errorf("run %s: %w", gompirun, err)
	}
	return nil
}

func seqList(g *snapshot.GlobalMeta) string {
	if len(g.Seqs) == 0 {
		return "none"
	}
	var s []string
	for _, r := range g.Seqs {
		s = append(s, strconv.Itoa(r.Seq))
	}
	return strings.Join(s, ", ")
}

// findGompirun finds the gompirun beside this program, else on $PATH;
// run as the umbrella binary (`gompi restart`), it is `gompi run`.
func findGompirun() (path string, prefix []string, err error) {
	if exe, err := os.Executable(); err == nil {
		if filepath.Base(exe) == "gompi" {
			return exe, []string{"run"}, nil
		}
		p := filepath.Join(filepath.Dir(exe), "gompirun")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil, nil
		}
	}
	p, err := exec.LookPath("gompirun")
	if err != nil {
		return "", nil, fmt.Errorf("gompirun is neither beside gompi-restart nor on $PATH: install it there")
	}
	return p, nil, nil
}

// Overrides are what the user changes at restart.
type Overrides struct {
	MCA      []string // name=value, beating the stored value of name
	AMCA     []string // replace the stored AMCA sets when given
	Hostfile string
	Extra    []string // more gompirun options
}

// knownParams returns the parameters the restarted job can be given:
// p's (built-in components: gompi-restart loads no plugins, to start
// fast), or, when the snapshot stores a parameter p does not know, those
// of the installed plugins too (crs_criu_binary is gompi-plugin-criu's),
// loaded once here and closed by the returned func.
func (o *options) knownParams(ctx context.Context, p *boot.Process, meta *snapshot.GlobalMeta, stderr io.Writer) (*mca.Params, func()) {
	unknown := slices.ContainsFunc(meta.Params, func(s mca.Setting) bool {
		_, ok := p.Params.Lookup(s.Name)
		return !ok
	})
	if !unknown {
		return p.Params, func() {}
	}
	withPlugins, err := boot.Load(ctx, boot.Options{Role: mca.RoleTool, Sources: o.params.SourceOptions(), LogOutput: stderr})
	if err != nil {
		return p.Params, func() {}
	}
	return withPlugins.Params, func() { withPlugins.Close() }
}

// savedBy is the CRS that saved every rank of seq, "" when they differ
// or none is recorded.
func savedBy(seq snapshot.SeqRecord) string {
	name := ""
	for i, p := range seq.Procs {
		if i > 0 && p.CRS != name {
			return ""
		}
		name = p.CRS
	}
	return name
}

// Command returns gompirun's arguments (without the program name) that
// restart point: the stored AMCA sets and parameters (except those the AMCA
// sets give, and those overridden), the user's overrides, the rank count,
// the launch, and the restart spec. Stored parameters this gompi does not
// know are left out with a warning.
func Command(point snapshot.RestartPoint, ov Overrides, known *mca.Params) (args, warnings []string) {
	meta := point.Meta
	args = []string{"-np", strconv.Itoa(meta.SeqRanks(point.Seq))}
	if ov.Hostfile != "" {
		args = append(args, "--hostfile", ov.Hostfile)
	}
	amca := meta.AMCA
	if len(ov.AMCA) > 0 {
		amca = ov.AMCA
	}
	if len(amca) > 0 {
		args = append(args, "-am", strings.Join(amca, ","))
	}
	overridden := map[string]bool{}
	for _, kv := range ov.MCA {
		name, _, _ := strings.Cut(kv, "=")
		overridden[strings.TrimSpace(name)] = true
	}
	crsNamed := overridden[crs.Name]
	for _, s := range meta.Params {
		switch {
		case overridden[s.Name], s.Origin.Source == mca.SourceAMCA, s.Name == "mca_base_param_file_prefix":
			continue
		}
		if known != nil {
			if _, ok := known.Lookup(s.Name); !ok {
				warnings = append(warnings, fmt.Sprintf("parameter %s = %q stored in the snapshot is not known to this gompi; left out", s.Name, s.Value))
				continue
			}
		}
		args = append(args, "--mca", s.Name, s.Value)
		crsNamed = crsNamed || s.Name == crs.Name
	}
	if name := savedBy(point.Seq); name != "" && !crsNamed {
		// The CRS that made the snapshot restores it: -am ft-enable-cr
		// alone would choose again, maybe another (no CRIU here).
		args = append(args, "--mca", crs.Name, name)
	}
	for _, kv := range ov.MCA {
		name, value, _ := strings.Cut(kv, "=")
		args = append(args, "--mca", strings.TrimSpace(name), value)
	}
	args = append(args, ov.Extra...)
	l := launchInfo(meta.Launch)
	if l.Cwd != "" {
		args = append(args, "--wdir", l.Cwd)
	}
	for _, e := range l.Env {
		args = append(args, "-x", e)
	}
	args = append(args, "--restart-ref", point.Ref.String(), "--restart-seq", strconv.Itoa(point.Seq.Seq))
	if l.Program == "" {
		warnings = append(warnings, "the snapshot records no program (made by an older gompi?)")
	}
	args = append(args, "--", l.Program)
	return append(args, l.Args...), warnings
}

// Main runs gompi-restart with the process's arguments.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cli.Execute(ctx, NewCommand(), NormalizeArgs(os.Args[1:]), false)
}
