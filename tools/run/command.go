// Package run is gompirun's command (also `gompi run`): its flags, their
// checks, and the call into rte/hnp, which runs the job.
package run

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"gompi/boot"
	"gompi/cli"
	"gompi/frameworks/plm/slurm"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
	"gompi/rte/hnp"
	"gompi/rte/hostfile"
	"gompi/rte/mapping"
)

// runOptions are gompirun's flags.
type runOptions struct {
	np            int
	hosts         []string
	hostfile      string
	mapBy         string
	oversubscribe bool
	env           []string
	tagOutput     bool
	wdir          string
	params        *cli.ParamFlags
	restartRef    string
	restartSeq    int

	nodes   []hostfile.Node
	policy  mapping.Policy
	xenv    []string
	restart *hnp.Restart
	meta    snapshot.MetaStore
}

// NewCommand returns the gompirun command (also `gompi run`). Its flags
// end at the program: everything after it is the program's.
func NewCommand() *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "gompirun [options] PROGRAM [ARGS...]",
		Short: "Run a parallel job: start one gompid per node and the ranks under them",
		Long: `gompirun runs PROGRAM as a parallel job of -np ranks. It maps the ranks onto
the nodes of --host or --hostfile (else, inside a Slurm allocation, the
allocation's nodes with its tasks per node as slots; else this machine),
starts one gompid daemon per node through the PLM framework (plm = local:
every node name is a simulated node on this machine; --mca plm ssh: each
node's daemon is started with ssh; plm slurm, chosen inside an allocation:
the daemons are the tasks of one srun step), prints the ranks' output and ends with
the job's exit status: 0, the status of the first rank that failed (128+N
for a rank killed by signal N), or 128+N when gompirun was interrupted by
signal N (SIGINT and SIGTERM are forwarded to the ranks; SIGUSR1, SIGUSR2 and
SIGCONT too, without ending the job: SIGCONT resumes a job gompi-checkpoint
--stop left stopped).

Open MPI's single-dash spellings work: -np 4, -host a,b, -hostfile H,
-mca name value, -am set, -x VAR.`,
		Example: `  gompirun -np 4 ./heat
  gompirun -np 4 --hostfile hosts --map-by node --tag-output ./heat
  gompirun -np 2 --host n1,n2 -x OMP_NUM_THREADS=1 --mca plm ssh ./app`,
		Args:    cobra.MinimumNArgs(1),
		Version: cli.Version(),
	}
	f := cmd.Flags()
	f.IntVarP(&o.np, "np", "n", 0, "number of ranks (default: one per slot)")
	f.StringArrayVarP(&o.hosts, "host", "H", nil, "nodes to run on, with optional slots: a,b:2 (repeatable)")
	f.StringVar(&o.hostfile, "hostfile", "", "file of nodes, one per line: `node1 slots=4 max_slots=8`")
	f.StringVar(&o.mapBy, "map-by", "slot", "how ranks are spread: slot (fill each node in turn) or node (round robin)")
	f.BoolVar(&o.oversubscribe, "oversubscribe", false, "allow more ranks on a node than its slots")
	f.StringArrayVarP(&o.env, "x", "x", nil, "export an environment variable to the ranks: -x VAR (its value here) or -x VAR=value (repeatable)")
	f.BoolVar(&o.tagOutput, "tag-output", false, "prefix every line of output with [job,rank]<stdout>: or <stderr>:")
	f.StringVar(&o.wdir, "wdir", "", "working directory of the ranks (default: the current one)")
	// Open MPI's --sstore-load, in two flags: a path may hold any character.
	f.StringVar(&o.restartRef, "restart-ref", "", "internal (gompi-restart): start every rank from its local snapshot in this global snapshot reference")
	f.IntVar(&o.restartSeq, "restart-seq", -1, "internal (gompi-restart): the committed sequence to restart from")
	_ = f.MarkHidden("restart-ref")
	_ = f.MarkHidden("restart-seq")
	f.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		switch name {
		case "machinefile":
			name = "hostfile"
		case "wd":
			name = "wdir"
		}
		return pflag.NormalizedName(name)
	})
	o.params = cli.AddParamFlags(cmd)
	cli.StopAtArg(cmd)
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if err := o.complete(); err != nil {
			return err
		}
		return o.run(c, args)
	}
	return cmd
}

// complete checks the flags and reads the host list and hostfile.
func (o *runOptions) complete() error {
	if o.np < 0 {
		return cli.Usagef("-np %d: want a number of ranks", o.np)
	}
	var err error
	if o.policy, err = mapping.ParsePolicy(o.mapBy); err != nil {
		return cli.Usagef("%v", err)
	}
	if o.hostfile != "" && len(o.hosts) > 0 {
		return cli.Usagef("--host and --hostfile both given: use one")
	}
	if o.hostfile != "" {
		if o.nodes, err = hostfile.ReadFile(o.hostfile); err != nil {
			return err
		}
	}
	if len(o.hosts) > 0 {
		if o.nodes, err = hostfile.ParseHosts(strings.Join(o.hosts, ",")); err != nil {
			return cli.Usagef("%v", err)
		}
	}
	if o.nodes == nil && slurm.InAllocation(os.Getenv) {
		if err := o.slurmNodes(); err != nil {
			return err
		}
	}
	if (o.restartRef == "") != (o.restartSeq < 0) {
		return cli.Usagef("--restart-ref and --restart-seq go together (gompi-restart passes both)")
	}
	if o.restartRef != "" {
		ref, err := snapshot.ParseRef(o.restartRef, "")
		if err != nil {
			return cli.Usagef("--restart-ref: %v", err)
		}
		o.restart = &hnp.Restart{Ref: ref, Seq: o.restartSeq}
	}
	for _, x := range o.env {
		k, v, ok := strings.Cut(x, "=")
		if k == "" || strings.ContainsAny(k, " \t") {
			return cli.Usagef("-x %q: want VAR or VAR=value", x)
		}
		if !ok {
			if v, ok = os.LookupEnv(k); !ok {
				return cli.Usagef("-x %s: %s is not set here; write -x %s=value", k, k, k)
			}
		}
		o.xenv = append(o.xenv, k+"="+v)
	}
	return nil
}

// slurmNodes takes the nodes and slots of the Slurm allocation gompirun
// runs in, as Open MPI's ras/slurm does, when no --host or --hostfile
// says otherwise.
func (o *runOptions) slurmNodes() error {
	a, err := slurm.ReadAllocation(os.Getenv)
	if err != nil {
		return fmt.Errorf("gompirun: inside a Slurm allocation: %w", err)
	}
	if have := a.TotalSlots(); o.np > have && !o.oversubscribe {
		return cli.Usagef("-np %d, but Slurm job %s has %d slots (%s=%s on %s): allocate more tasks (salloc -n %d), lower -np, or allow more ranks than slots with --oversubscribe",
			o.np, a.JobID, have, a.SlotsVar, a.SlotsList, a.NodeList, o.np)
	}
	for _, n := range a.Nodes {
		if !hostfile.ValidName(n.Name) {
			return fmt.Errorf("gompirun: Slurm job %s: node %q of %s is not a name gompi can use as a node", a.JobID, n.Name, a.NodeList)
		}
		o.nodes = append(o.nodes, hostfile.Node{Name: n.Name, Slots: n.Slots, SlotsGiven: true})
	}
	return nil
}

func (o *runOptions) run(c *cobra.Command, args []string) error {
	// gompirun handles its signals itself: the job must end in order, not
	// with gompirun's context.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGCONT)
	defer signal.Stop(sigs)
	ctx := context.WithoutCancel(c.Context())

	p, err := boot.Load(ctx, boot.Options{Role: mca.RoleHNP, Sources: o.params.SourceOptions(), LogOutput: c.ErrOrStderr()})
	if err != nil {
		return err
	}
	defer p.Close()
	// Where the job's snapshot metadata lives: the reference it restarts
	// from, or the global snapshot folder (remote ones need FileM).
	var ref snapshot.Ref
	if o.restart != nil {
		ref = o.restart.Ref
	} else if dir, err := snapc.GlobalDir(p.Values); err == nil {
		ref.Dir = dir
	}
	ms, closeMeta, err := p.MetaStore(ctx, ref)
	if err != nil {
		return err
	}
	defer closeMeta()
	o.meta = ms
	if o.restart != nil {
		o.restart.Meta = ms
	}
	code, err := hnp.Run(ctx, hnp.Options{
		NP: o.np, Nodes: o.nodes, MapBy: o.policy, Oversubscribe: o.oversubscribe,
		Program: args[0], Args: args[1:], Env: o.xenv, Cwd: o.wdir, TagOutput: o.tagOutput,
		Command: append([]string{"gompirun"}, os.Args[1:]...),
		Proc:    p, Stdout: c.OutOrStdout(), Stderr: c.ErrOrStderr(), Signals: sigs, Restart: o.restart, Meta: o.meta,
	})
	if err != nil || code != 0 {
		if code == 0 {
			code = cli.ExitFailure
		}
		return &cli.ExitError{Code: code, Err: err}
	}
	return nil
}

// singleDash are gompirun's long flags Open MPI users write with one dash.
var singleDash = map[string]bool{
	"np": true, "host": true, "hostfile": true, "machinefile": true, "map-by": true,
	"oversubscribe": true, "tag-output": true, "wdir": true, "wd": true,
}

// valueFlags are the spellings that take a separate value.
var valueFlags = []string{"-n", "--np", "-np", "-H", "--host", "-host", "--hostfile", "-hostfile",
	"--machinefile", "-machinefile", "--map-by", "-map-by", "-x", "--x", "--wdir", "-wdir", "--wd", "-wd",
	"--restart-ref", "--restart-seq"}

// NormalizeArgs rewrites Open MPI's single-dash long options (-np 4,
// -hostfile H) into the double-dash form the flag parser takes, up to the
// program; the --mca and -am spellings are left to cli.Execute. The
// umbrella `gompi run` must pass its arguments through it too.
func NormalizeArgs(args []string) []string {
	norm := mca.NormalizeArgs(args, true, valueFlags...)
	out := make([]string, 0, len(norm))
	takes := map[string]bool{}
	for _, f := range valueFlags {
		takes[f] = true
	}
	for i := 0; i < len(norm); i++ {
		a := norm[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			return append(out, norm[i:]...)
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if !strings.HasPrefix(a, "--") && singleDash[name] {
			a = "-" + a
		}
		out = append(out, a)
		if !hasValue && (takes[a] || takes[norm[i]]) && i+1 < len(norm) {
			out = append(out, norm[i+1])
			i++
		}
	}
	return out
}

// Main runs gompirun with the process's arguments and returns its exit status.
func Main() int {
	return cli.Execute(context.Background(), NewCommand(), NormalizeArgs(os.Args[1:]), true)
}
