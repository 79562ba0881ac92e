// Package hnp is gompirun, the head node process of a job: it maps the
// ranks onto the nodes, starts one gompid per node through the selected
// PLM, serves the daemons (a control stream from each daemon at the top
// of the daemon tree, carrying the messages of the daemons below it:
// tree.go) and the tools (an
// owner-only Unix socket found from its PID), gathers the modex, prints
// the ranks' output, forwards signals, watches daemons with heartbeats,
// hands every failure to the ErrMgr stack (and serves its policies, such
// as running on without failed ranks: errmgr.Runtime), runs the job's
// global snapshot coordinator (checkpoints asked for by gompi-checkpoint
// or by the ranks; restarts from a snapshot), and ends with the job's exit
// status: 0 (also when every failure was run through), the status of the
// first rank that failed (128+signal for a signal), or 128+signal when
// gompirun itself was interrupted.
package hnp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"gompi/boot"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/plm"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
	"gompi/rte"
	"gompi/rte/control"
	pb "gompi/rte/control/proto"
	"gompi/rte/hostfile"
	"gompi/rte/jobs"
	"gompi/rte/mapping"
)

// Options describe a job to run.
type Options struct {
	// NP is the number of ranks; 0 means one per slot.
	NP int
	// Nodes are the nodes to use (--host, --hostfile); nil means this
	// machine, as node "localhost", with one slot per CPU (or per rank,
	// when -np asks for more).
	Nodes         []hostfile.Node
	MapBy         mapping.Policy
	Oversubscribe bool
	// Program is the program as the user wrote it; Run resolves it.
	Program string
	Args    []string
	// Env holds KEY=VALUE pairs added to every rank's environment (-x).
	Env []string
	// Cwd is the ranks' working directory ("" = gompirun's).
	Cwd       string
	TagOutput bool
	// Command is the whole command line, for gompi-ps.
	Command []string
	Proc    *boot.Process
	Stdout  io.Writer
	Stderr  io.Writer
	// Signals delivers the signals gompirun caught (SIGINT, SIGTERM,
	// SIGHUP end the job; SIGUSR1, SIGUSR2 and SIGCONT are forwarded to
	// the ranks).
	Signals <-chan os.Signal
	// Restart, when set, starts every rank from its local snapshot of a
	// committed sequence; the job's checkpoints continue that reference.
	Restart *Restart
	// Meta reads and writes the job's global snapshot metadata (nil: this
	// node's file system; a remote snapshot folder needs FileM).
	Meta snapshot.MetaStore
}

// ResolveProgram finds the program a job runs, as the shell would: a name
// with a '/' is a path (made absolute against cwd), others are looked up
// on $PATH. Daemons run the absolute path on every node.
func ResolveProgram(prog, cwd string) (string, error) {
	if prog == "" {
		return "", fmt.Errorf("no program to run: write gompirun [options] PROGRAM [ARGS...]")
	}
	if !strings.Contains(prog, "/") {
		p, err := exec.LookPath(prog)
		if err != nil {
			return "", fmt.Errorf("program %q not found on $PATH: give its path (./%s) or add its folder to $PATH", prog, prog)
		}
		prog = p
	}
	if !filepath.IsAbs(prog) {
		prog = filepath.Join(cwd, prog)
	}
	st, err := os.Stat(prog)
	switch {
	case err != nil:
		return "", fmt.Errorf("program %s not found: %w", prog, err)
	case st.IsDir():
		return "", fmt.Errorf("program %s is a directory, not a program", prog)
	case st.Mode()&0o111 == 0:
		return "", fmt.Errorf("program %s is not executable: chmod +x it", prog)
	}
	return prog, nil
}

// NewJobID returns a fresh job id: 8 hex digits.
func NewJobID() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("hnp: job id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Run runs the job and returns its exit status. An error comes with a
// status too (1 unless said otherwise): the caller prints the error.
// Messages about the job (abort reports) are printed on Stderr by Run.
func Run(ctx context.Context, o Options) (int, error) {
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if err := layRemoteFileM(o); err != nil {
		return 1, err
	}
	vals := o.Proc.Values
	log := o.Proc.FrameworkLogger(plm.Name)
	pl, err := planJob(o)
	if err != nil {
		return 1, err
	}

	mods, err := boot.AssembleHNP(ctx, o.Proc, pl.program)
	if err != nil {
		return 1, err
	}
	defer mods.Close()
	plmCand, stack := mods.PLM, mods.ErrMgr

	id, err := NewJobID()
	if err != nil {
		return 1, err
	}
	secret, err := control.NewSecret()
	if err != nil {
		return 1, err
	}
	dir, err := hnpDir(secret)
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)

	data, err := control.NewSecret()
	if err != nil {
		return 1, err
	}
	j := newJob(id, data, o, pl.m, pl.program, pl.cwd, mods, livePorts(stack, o.Stderr), o.Proc.FrameworkLogger(errmgr.Name), log)
	if err := stack.Provision(ctx, errmgr.Host{Job: jobRuntime{j}}); err != nil {
		return 1, err
	}
	if err := j.startSnapC(ctx); err != nil {
		return 1, err
	}
	defer func() { j.closeSnapC("the job is over") }()
	svc := newService(j)
	ctl, err := serve(svc, dir, secret, plmCand.Module.Network(), vals)
	if err != nil {
		return 1, err
	}
	defer ctl.stop()

	ps, _ := jobs.ProcStart(os.Getpid())
	if err := jobs.Write(dir, jobs.Record{Job: id, PID: os.Getpid(), NP: pl.np, Nodes: pl.m.Nodes, PLM: plmCand.Info.Name,
		Start: j.start, Command: o.Command, ProcStart: ps}); err != nil {
		return 1, err
	}

	for {
		log.Debug("launching daemons", "job", id, "plm", plmCand.Info.Name, "nodes", j.m.Nodes, "contact", ctl.contacts, "tree", j.treeSummary())
		daemons, err := plmCand.Module.Launch(ctx, plm.Spec{
			Job: id, Nodes: j.m.Nodes, Contact: ctl.contacts, Handshake: j.handshake(ctl.hs).Marshal(),
			SessionDir: vals.String(plm.ParamSessionDir), Verbose: vals.Int(plm.Name + "_base_verbose"), Stderr: o.Stderr,
		})
		if err != nil {
			return 1, fmt.Errorf("start the daemons: %w", err)
		}
		code, err := j.run(daemons)
		if f := vals.String(plm.ParamTreeStats); f != "" {
			if werr := j.writeTreeStats(f); werr != nil {
				fmt.Fprintf(o.Stderr, "gompirun: %s: %v\n", plm.ParamTreeStats, werr)
			}
		}
		if plmCand.Module.Network() == "unix" {
			j.removeNodeDirs(vals.String(plm.ParamSessionDir))
		}
		if j.recovery == nil || err != nil {
			return code, err
		}
		nj, err := j.recovered(ctx)
		if err != nil {
			return 1, err
		}
		j.closeSnapC("the job is over")
		j = nj
		svc.cur.Store(j)
	}
}

// jobPlan is where a job runs what.
type jobPlan struct {
	program, cwd string
	np           int
	m            mapping.Map
}

// planJob resolves the program, maps the ranks onto the nodes and, for a
// restart, checks the snapshot, before anything is started.
func planJob(o Options) (jobPlan, error) {
	cwd := o.Cwd
	if cwd == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			return jobPlan{}, fmt.Errorf("working directory: %w", err)
		}
	}
	program, err := ResolveProgram(o.Program, cwd)
	if err != nil {
		return jobPlan{}, err
	}
	nodes := o.Nodes
	if len(nodes) == 0 {
		nodes = []hostfile.Node{{Name: "localhost", Slots: max(runtime.NumCPU(), o.NP)}}
	}
	np := o.NP
	if np == 0 {
		for _, n := range nodes {
			np += n.Slots
		}
	}
	m, err := mapping.Place(nodes, np, o.MapBy, o.Oversubscribe)
	if err != nil {
		return jobPlan{}, err
	}
	if o.Restart != nil {
		if err := checkRestart(o.Restart, np); err != nil {
			return jobPlan{}, err
		}
	}
	return jobPlan{program: program, cwd: cwd, np: np, m: m}, nil
}

// hnpDir makes the HNP's private directory (control socket, secret, job
// record) and writes the secret there. Both the per-user folder and the
// HNP's own must be ours alone: in a shared /tmp another user could
// otherwise have made the first.
func hnpDir(secret control.Secret) (string, error) {
	if err := control.PrivateDir(rte.RuntimeDir()); err != nil {
		return "", fmt.Errorf("control directory: %w", err)
	}
	dir := rte.HNPDir(os.Getpid())
	// A directory of this pid can only be a dead gompirun's that had it:
	// gone before anything is put there, its stale record cannot make a
	// gompi-ps meanwhile remove the directory with this one's secret and
	// socket (jobs.List keeps the directory of a live pid with no record).
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("control directory: a dead job's %s: %w", dir, err)
	}
	if err := control.PrivateDir(dir); err != nil {
		return "", fmt.Errorf("control directory: %w", err)
	}
	if err := jobs.WriteSecret(dir, secret); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// controlServers are the servers daemons and tools reach gompirun by.
type controlServers struct {
	contacts []string // for the daemons
	hs       control.Handshake
	stop     func()
}

// serve starts the servers of svc: the owner-only Unix socket in dir
// (tools, local daemons) and, when the PLM's daemons connect over TCP, a
// TLS listener whose certificate the handshake pins.
func serve(svc *service, dir string, secret control.Secret, network string, vals *mca.Values) (controlServers, error) {
	sock := filepath.Join(dir, rte.ControlSocket)
	ul, err := control.ListenUnix(sock)
	if err != nil {
		return controlServers{}, err
	}
	usrv := control.NewServer(secret, nil)
	pb.RegisterHNPServer(usrv, svc)
	pb.RegisterToolServer(usrv, svc)
	go usrv.Serve(ul)
	c := controlServers{hs: control.Handshake{Secret: secret}, contacts: []string{"unix:" + sock}, stop: usrv.Stop}
	if network != "tcp" {
		return c, nil
	}
	cert, pin, err := control.NewCertificate()
	if err != nil {
		usrv.Stop()
		return controlServers{}, err
	}
	tl, addrs, err := control.ListenTCP(vals.String(plm.ParamHNPAddress))
	if err != nil {
		usrv.Stop()
		return controlServers{}, err
	}
	tsrv := control.NewServer(secret, credentials.NewTLS(control.ServerTLS(cert)))
	pb.RegisterHNPServer(tsrv, svc)
	go tsrv.Serve(tl)
	c.hs.Pin, c.contacts = pin, addrs
	c.stop = func() {
		tsrv.Stop()
		usrv.Stop()
	}
	return c, nil
}

// recovered is the job's next run after a recovery (errmgr autor): the
// same job again, in this gompirun, from the last committed sequence,
// lost ranks moved.
func (j *job) recovered(ctx context.Context) (*job, error) {
	rec := j.recovery
	next, err := replan(j.m, rec.plan)
	if err != nil {
		return nil, err
	}
	o := j.o
	o.Restart = &Restart{Ref: rec.ref, Seq: rec.seq, Meta: o.Meta}
	stack := j.mods.ErrMgr
	// The relaunched ranks get a data-plane secret of their own: nothing
	// of the ended generation (a process that outlived its kill, a secret
	// that leaked from it) can complete a hello with them.
	data, err := control.NewSecret()
	if err != nil {
		return nil, fmt.Errorf("recovery %d: %w", rec.n, err)
	}
	nj := newJob(j.id, data, o, next, j.program, j.cwd, j.mods, livePorts(stack, o.Stderr), j.elog, j.log)
	nj.recoveries, nj.recoveredFrom, nj.computing = rec.n, rec, rec
	if err := stack.Provision(ctx, errmgr.Host{Job: jobRuntime{nj}}); err != nil {
		return nil, fmt.Errorf("recovery %d: %w", rec.n, err)
	}
	if err := nj.startSnapC(ctx); err != nil {
		return nil, fmt.Errorf("recovery %d: %w", rec.n, err)
	}
	msg := fmt.Sprintf("gompirun: recovery %d: restarting %d ranks from sequence %d of %s", rec.n, len(next.RankNode), rec.seq, rec.ref.Name)
	if mv := moves(rec.before, next); len(mv) > 0 {
		msg += " (" + strings.Join(mv, ", ") + ")"
	}
	fmt.Fprintln(o.Stderr, msg)
	return nj, nil
}

// grpcStream is the server side of a daemon's Attach.
type grpcStream = grpc.BidiStreamingServer[pb.DaemonMessage, pb.HNPMessage]
