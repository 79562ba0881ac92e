package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"gompi/frameworks"
	"gompi/mca"
	pb "gompi/mca/plugin/proto"
)

// killGrace is how long Close lets go-plugin stop a plugin gracefully
// before the process is killed outright.
const killGrace = 5 * time.Second

// LoadError is a plugin (or one of its components) that could not be used.
// It is reported and recorded, never fatal.
type LoadError struct {
	Path string // the plugin binary, or the folder that could not be read
	Err  error
}

func (e *LoadError) Error() string { return "plugin " + e.Path + ": " + e.Err.Error() }
func (e *LoadError) Unwrap() error { return e.Err }

// Plugin describes a running plugin process.
type Plugin struct {
	Path       string
	PID        int
	Components []mca.ComponentInfo // the ones added to the frameworks
}

// Host holds the plugin processes of one gompi process.
type Host struct {
	log *slog.Logger

	mu    sync.Mutex
	procs []*proc
	errs  []error
}

// Load starts the plugins found on mca_base_component_path (read with
// src.Peek, before the values are resolved, because the plugins' components
// register parameters) and adds their components to set. A plugin that
// cannot be used is logged (when mca_base_component_show_load_errors is on)
// and recorded in Errors; only a malformed value of the bridge's own
// parameters fails Load. Call it after registering the built-in components
// and RegisterParams, before Params.Resolve; Close the Host when the
// process ends.
func Load(ctx context.Context, set *frameworks.Set, src *mca.Sources, log *slog.Logger) (*Host, error) {
	cfg, err := ConfigFrom(src.Peek)
	if err != nil {
		return nil, err
	}
	return LoadConfig(ctx, set, cfg, log)
}

// LoadConfig is Load with the configuration given, for processes that
// receive their settings from another process instead of reading sources.
func LoadConfig(ctx context.Context, set *frameworks.Set, cfg Config, log *slog.Logger) (*Host, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Host{log: log}
	files := h.discover(cfg)
	for _, path := range files {
		if err := ctx.Err(); err != nil {
			// Components already added stay in set but fail with
			// ErrPluginDied; a caller whose start-up is cancelled gives up.
			h.Close()
			return nil, fmt.Errorf("plugin: load: %w", err)
		}
		p, descs, err := h.start(ctx, path, cfg)
		if err != nil {
			h.fail(cfg, path, err)
			continue
		}
		for _, d := range descs {
			info, err := p.add(set, d)
			if err != nil {
				h.failComponent(cfg, path, fmt.Errorf("component %s/%s: %w", d.GetFramework(), d.GetName(), err))
				continue
			}
			p.comps = append(p.comps, info)
		}
		if len(p.comps) == 0 {
			// Nothing of it is usable: do not keep the process around.
			p.kill()
			if len(descs) == 0 {
				h.fail(cfg, path, errors.New("it carries no components"))
			}
			continue
		}
		h.mu.Lock()
		h.procs = append(h.procs, p)
		h.mu.Unlock()
		log.Debug("plugin loaded", "plugin", path, "pid", p.pid, "components", len(p.comps))
	}
	return h, nil
}

func (h *Host) fail(cfg Config, path string, err error) {
	h.record(cfg, "plugin not loaded", path, err)
}

func (h *Host) failComponent(cfg Config, path string, err error) {
	h.record(cfg, "plugin component not loaded", path, err)
}

func (h *Host) record(cfg Config, msg, path string, err error) {
	h.mu.Lock()
	h.errs = append(h.errs, &LoadError{Path: path, Err: err})
	h.mu.Unlock()
	if cfg.ShowLoadErrors {
		h.log.Warn(msg, "plugin", path, "err", err)
	}
}

// Errors returns every plugin (or component of one) that could not be
// used, as *LoadError.
func (h *Host) Errors() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.errs...)
}

// Plugins returns the running plugins.
func (h *Host) Plugins() []Plugin {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Plugin, len(h.procs))
	for i, p := range h.procs {
		out[i] = Plugin{Path: p.path, PID: p.pid, Components: append([]mca.ComponentInfo(nil), p.comps...)}
	}
	return out
}

// Close stops every plugin process and waits until each has exited (and is
// reaped). Calls to their components fail with ErrPluginDied afterwards.
// It is safe to call more than once.
func (h *Host) Close() error {
	h.mu.Lock()
	procs := h.procs
	h.procs = nil
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.kill() }()
	}
	wg.Wait()
	return nil
}

// discover lists the plugin binaries on the search path: executable regular
// files named gompi-plugin-*, each once.
func (h *Host) discover(cfg Config) []string {
	var out []string
	seen := map[string]bool{}
	for _, dir := range cfg.Dirs {
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			h.fail(cfg, dir, fmt.Errorf("read plugin folder (%s): %w", ParamPath, err))
			continue
		}
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), FilePrefix) {
				continue
			}
			path, err := filepath.Abs(filepath.Join(dir, e.Name()))
			if err != nil {
				h.fail(cfg, filepath.Join(dir, e.Name()), err)
				continue
			}
			fi, err := os.Stat(path)
			if err != nil {
				h.fail(cfg, path, err)
				continue
			}
			if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
				h.log.Debug("not a plugin: not an executable file", "path", path)
				continue
			}
			real, err := filepath.EvalSymlinks(path)
			if err != nil {
				real = path
			}
			if seen[real] {
				continue
			}
			seen[real] = true
			out = append(out, path)
		}
	}
	return out
}

// proc is one running plugin process.
type proc struct {
	path      string
	pid       int
	client    *goplugin.Client
	cmd       *exec.Cmd // read ProcessState only once c.done is closed
	c         *clients
	cb        *hostCallbacks // the host objects lent to its modules
	fds       *fdSender      // the descriptors passed to its modules
	timeout   time.Duration  // control calls
	ioTimeout time.Duration  // data-moving calls
	log       *slog.Logger
	comps     []mca.ComponentInfo
	stopped   atomic.Bool // Close stopped it on purpose
	warn      sync.Once
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// start checks, starts and describes one plugin.
func (h *Host) start(ctx context.Context, path string, cfg Config) (*proc, []*pb.ComponentDescription, error) {
	base := filepath.Base(path)
	var sc *goplugin.SecureConfig
	if pin, ok := cfg.Checksums[base]; ok {
		sc = &goplugin.SecureConfig{Checksum: pin, Hash: sha256.New()}
	} else if cfg.RequireChecksum {
		actual, err := sha256File(path)
		if err != nil {
			return nil, nil, fmt.Errorf("refused: %s is on and the checksum cannot be computed: %w", ParamRequireChecksum, err)
		}
		return nil, nil, fmt.Errorf("refused: %s is on and %s pins no checksum for %s; if you trust this file, add %s=sha256:%s",
			ParamRequireChecksum, ParamChecksums, base, base, actual)
	}
	plog := h.log.With("plugin", path)
	cmd := exec.Command(path)
	cmd.Env = []string{envLogLevel + "=" + hostLevel(plog).String()}
	// Its own process group, so Close can also end whatever the plugin
	// started, and a terminal's ^C reaches the host, which decides.
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	// Descriptors a module's host holds cross on a socket of their own.
	fds, theirs, err := newFDPair()
	if err != nil {
		return nil, nil, err
	}
	defer theirs.Close() // the child has its copy once started
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Env = append(cmd.Env, envFDs+"=1")
	startTimeout := cfg.Timeout
	if startTimeout <= 0 {
		startTimeout = time.Minute
	}
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          goplugin.PluginSet{pluginKey: &bridge{}},
		Cmd:              cmd,
		SecureConfig:     sc,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Logger:           newHCLogToSlog(plog, base),
		StartTimeout:     startTimeout,
		AutoMTLS:         true,
		SyncStdout:       &lineLogger{log: plog, stream: "stdout"},
		SyncStderr:       &lineLogger{log: plog, stream: "stderr"},
	})
	rpc, err := client.Client()
	if err != nil {
		fds.close()
		client.Kill()
		if errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
			actual, serr := sha256File(path)
			if serr != nil {
				actual = "unreadable (" + serr.Error() + ")"
			}
			return nil, nil, fmt.Errorf("refused: checksum mismatch: %s pins sha256:%x, the file has sha256:%s; reinstall the plugin you trust or update the pin",
				ParamChecksums, cfg.Checksums[base], actual)
		}
		return nil, nil, fmt.Errorf("start: %w", err)
	}
	raw, err := rpc.Dispense(pluginKey)
	if err != nil {
		fds.close()
		client.Kill()
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	c := raw.(*clients)
	p := &proc{path: path, client: client, cmd: cmd, c: c, cb: c.callbacks, fds: fds, timeout: cfg.Timeout, ioTimeout: cfg.IOTimeout, log: plog}
	if rc := client.ReattachConfig(); rc != nil {
		p.pid = rc.Pid
	}
	var resp *pb.DescribeResponse
	err = p.call(ctx, "describe", "", func(ctx context.Context) (err error) {
		resp, err = p.c.plugin.Describe(ctx, &pb.DescribeRequest{})
		return err
	})
	if err != nil {
		p.kill()
		return nil, nil, err
	}
	return p, resp.GetComponents(), nil
}

// add validates a described component and adds its proxy to set.
func (p *proc) add(set *frameworks.Set, d *pb.ComponentDescription) (mca.ComponentInfo, error) {
	info := mca.ComponentInfo{Framework: d.GetFramework(), Name: d.GetName(), Description: d.GetDescription(),
		Version: d.GetVersion(), Priority: int(d.GetPriority()), Origin: p.path}
	for _, s := range d.GetParams() {
		spec, err := specFromPB(s)
		if err != nil {
			return info, err
		}
		info.Params = append(info.Params, spec)
	}
	if err := checkSpecs(info); err != nil {
		return info, err
	}
	a, ok := adapters[info.Framework]
	if !ok {
		return info, fmt.Errorf("framework %q cannot be carried by a plugin on this host (supported: %s)", info.Framework, carried())
	}
	return info, a.add(set, a.component(proxyComponent{p: p, info: info, ref: &pb.ComponentRef{Framework: info.Framework, Name: info.Name}}))
}

// checkSpecs refuses parameter specs that registering would panic on (a
// bad name or default, a name given twice), since a plugin must never
// bring the host down.
func checkSpecs(info mca.ComponentInfo) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bad parameter: %v", r)
		}
	}()
	if len(info.Params) == 0 {
		return nil
	}
	scratch := mca.NewParams()
	prio := mca.ParamSpec{Name: info.Framework + "_" + info.Name + "_priority", Type: mca.Int, Default: "0"}
	scratch.Register("check", append([]mca.ParamSpec{prio}, info.Params...)...)
	return nil
}

// kill stops the process: go-plugin's graceful stop first, then SIGKILL
// to its process group if that does not end it within killGrace; anything
// the plugin started and left behind is killed with the group. It returns
// once the process is reaped, or, should a leftover child keep the plugin's
// output pipes open, once the bound has passed again.
func (p *proc) kill() {
	p.stopped.Store(true)
	defer p.fds.close()
	if p.exited() {
		// Anything left in its group is an orphan holding its pipes.
		p.killGroup()
	}
	done := make(chan struct{})
	go func() { p.client.Kill(); close(done) }()
	t := time.NewTimer(killGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		p.killGroup()
		t.Reset(killGrace)
		select {
		case <-done:
		case <-t.C:
			p.log.Warn("plugin killed but its output pipes stay open; something it started may still run", "pid", p.pid)
		}
	}
	p.killGroup()
}

func (p *proc) killGroup() {
	if p.pid > 0 {
		_ = unix.Kill(-p.pid, unix.SIGKILL)
	}
}

// exited reports whether the process has ended: go-plugin's done context,
// or, while a child of the plugin holds its output pipes open and go-plugin
// cannot reap it yet, its state in /proc.
func (p *proc) exited() bool { return p.c.done.Err() != nil || zombie(p.pid) }

func zombie(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

// died is the error of a call to a plugin whose process is gone.
func (p *proc) died(op string, comp string) error {
	if p.stopped.Load() {
		return fmt.Errorf("plugin %s: %s%s: %w: it was stopped (the plugin host is closed)", p.path, op, comp, ErrPluginDied)
	}
	how := "exited"
	if p.c.done.Err() != nil && p.cmd.ProcessState != nil { // set before done is closed
		how = p.cmd.ProcessState.String() // "exit status 3", "signal: killed"
	}
	p.warn.Do(func() {
		p.log.Warn("plugin process died; its components fail from now on", "pid", p.pid, "status", how)
	})
	return fmt.Errorf("plugin %s (pid %d): %s%s: %w (%s); its components fail until the gompi process is restarted, and the plugin's log above may say why",
		p.path, p.pid, op, comp, ErrPluginDied, how)
}

// call runs one control RPC under the plugin timeout and turns its failure
// into the component's own error or a bridge error naming the plugin.
func (p *proc) call(ctx context.Context, op, comp string, rpc func(ctx context.Context) error) error {
	return p.callWithin(ctx, p.timeout, ParamTimeout, op, comp, rpc)
}

// ioCall is call for data-moving RPCs, under the I/O timeout.
func (p *proc) ioCall(ctx context.Context, op, comp string, rpc func(ctx context.Context) error) error {
	return p.callWithin(ctx, p.ioTimeout, ParamIOTimeout, op, comp, rpc)
}

func (p *proc) callWithin(ctx context.Context, timeout time.Duration, param, op, comp string, rpc func(ctx context.Context) error) error {
	if comp != "" {
		comp = " " + comp
	}
	if p.exited() {
		return p.died(op, comp)
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	err := rpc(cctx)
	if err == nil {
		return nil
	}
	if ce := componentError(err); ce != nil {
		return ce
	}
	if ctx.Err() != nil {
		return fmt.Errorf("plugin %s: %s%s: %w", p.path, op, comp, ctx.Err())
	}
	code := status.Code(err)
	if code == codes.DeadlineExceeded || errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("plugin %s: %s%s: no answer within %s (%s); the plugin may be hung: %w",
			p.path, op, comp, timeout, param, context.DeadlineExceeded)
	}
	if p.waitExit(code) {
		return p.died(op, comp)
	}
	return fmt.Errorf("plugin %s: %s%s: %w", p.path, op, comp, err)
}

// waitExit reports whether the process has exited. A broken connection is
// seen before go-plugin reaps the process, so on such errors it waits for
// the exit a little.
func (p *proc) waitExit(code codes.Code) bool {
	if code != codes.Unavailable && code != codes.Canceled && code != codes.Internal && code != codes.Unknown {
		return p.exited()
	}
	wait := 5 * time.Second
	if p.timeout > 0 && p.timeout < wait {
		wait = p.timeout
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	// A zombie is not announced; look again every so often.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.c.done.Done():
			return true
		case <-tick.C:
			if zombie(p.pid) {
				return true
			}
		case <-t.C:
			return p.exited()
		}
	}
}

// lineLogger logs what a plugin writes to its stdout or stderr after it has
// started serving, one record per line, at debug level: it is not the
// plugin's structured log, and must never reach the host's stdout.
type lineLogger struct {
	log    *slog.Logger
	stream string
	mu     sync.Mutex
	buf    []byte
}

func (w *lineLogger) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.log.Debug(string(w.buf[:i]), "stream", w.stream)
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 64<<10 {
		w.log.Debug(string(w.buf), "stream", w.stream)
		w.buf = nil
	}
	return len(b), nil
}

// query forwards a Query with every setting the host resolved; it returns
// the module's handle, its priority and the optional interfaces it
// implements.
func (p *proc) query(ctx context.Context, ref *pb.ComponentRef, q mca.Query) (uint64, int, []string, error) {
	var resp *pb.QueryResponse
	err := p.call(ctx, "query", ref.GetFramework()+"/"+ref.GetName(), func(ctx context.Context) (err error) {
		resp, err = p.c.plugin.Query(ctx, &pb.QueryRequest{Component: ref, Settings: settingsToPB(q.Values),
			Role: int32(q.Role), Priority: int32(q.Priority)})
		return err
	})
	if err != nil {
		return 0, 0, nil, err
	}
	if resp.GetSkipped() {
		return 0, 0, nil, &remoteError{msg: string(resp.GetSkipReason()), wraps: []error{mca.ErrSkip}}
	}
	if n := resp.GetNote(); len(n) > 0 && q.Note != nil {
		q.Note(string(n))
	}
	return resp.GetModule(), int(resp.GetPriority()), resp.GetImplements(), nil
}
