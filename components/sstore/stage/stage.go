// Package stage is the SStore component that stages local snapshots on
// node-local storage, as Open MPI's sstore/stage was designed to: each rank
// writes its snapshot into a folder of its own node and goes back to work;
// the node's daemon then drains the files (compressing them if asked) to
// the global snapshot folder through FileM while the job runs, and keeps
// the last few sequences as a cache that a restart on the same node reads
// instead of global storage.
//
// While a node drains a sequence it also protects it on other nodes: a
// copy into its partner node's local storage (sstore_stage_partner,
// partner.go) and its share of an XOR set's parity (sstore_stage_xor_set,
// xorset.go, xorsync.go), so a restart rebuilds a lost node's snapshots
// without global storage, or with none at all (snapc_base_global_snapshot_dir
// none). Fetch takes the fastest intact copy: own cache, partner copy, XOR
// rebuild, global storage.
//
// On a node the layout is
//
//	<root>/<node>/<ref name>/<seq>/gompi_snapshot_<rank>.ckpt/
//
// where <root> is sstore_stage_local_snapshot_dir (default
// <tmp>/gompi-stage-<uid>). The layout is package snapshot's (stage.go
// there: StageNodeDir, StageLocalDir, StagedCopy), since gompi-restart -i
// reads it too.
//
// With sstore_stage_differential on (dcp.go), the drain stores each file as
// blocks (package frameworks/sstore/blocks): only the blocks that changed
// since the previous committed sequence, which it reads the manifests of
// from global storage, go into the sequence's pack; a fetch reassembles
// and verifies the file from the packs its manifest references.
//
// A rank's snapshot on global storage is complete once its snapshot_meta is
// there: Sync puts it after every file it records. The sequence itself
// counts only once the global coordinator commits it, after every node's
// Sync returned.
package stage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"gompi/frameworks/filem"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/blocks"
	"gompi/frameworks/sstore/compress"
	"gompi/frameworks/sstore/snapshot"
	"gompi/frameworks/sstore/xor"
	"gompi/mca"
)

// Name of the component.
const Name = "stage"

// Priority is the component's default priority: below central (20), as in
// Open MPI, so stage runs only when sstore names it.
const Priority = 10

// The component's parameters.
const (
	prefix             = sstore.Name + "_" + Name + "_"
	ParamLocalDir      = snapshot.ParamStageRoot
	ParamMaxInflight   = prefix + "max_inflight"
	ParamCompress      = prefix + "compress"
	ParamCompressLevel = prefix + "compress_level"
	ParamShuffle       = prefix + "compress_shuffle"
	ParamCache         = prefix + "cache"
	ParamPartner       = snapshot.ParamStagePartner
	ParamXORSet        = snapshot.ParamStageXORSet
)

// New returns the stage SStore component.
func New() mca.Component[sstore.Module] { return newComponent(testHooks) }

func newComponent(hooks bool) mca.Component[sstore.Module] {
	params := []mca.ParamSpec{
		{Name: ParamLocalDir, Type: mca.String, Level: mca.LevelUser,
			Help: "Node-local folder for staged snapshots (an absolute path; each node uses <dir>/<node>); empty: $TMPDIR/gompi-stage-<uid> (/tmp when TMPDIR is unset)"},
		{Name: ParamMaxInflight, Type: mca.Int, Default: "10", Level: mca.LevelTuner,
			Help: "Files a node compresses and moves to global storage at the same time (at least 1)"},
		{Name: ParamCompress, Type: mca.String, Default: compress.None, Choices: compress.Algorithms, Level: mca.LevelUser,
			Help: "Compression of snapshot files on their way to global storage: " + strings.Join(compress.Algorithms, ", ") + "; restart decompresses and verifies them"},
		{Name: ParamCompressLevel, Type: mca.Int, Default: "0", Level: mca.LevelTuner,
			Help: "Compression level (0 = the algorithm's default; zstd 1-22, s2 1-3, gzip 1-9)"},
		{Name: ParamShuffle, Type: mca.String, Default: compress.ShuffleAuto, Choices: compress.ShuffleModes, Level: mca.LevelTuner,
			Help: "Byte shuffle before compression, which makes floating-point state compress: auto (samples each file with no filter, a shuffle for 8- or 4-byte elements, and the differences of 8-byte elements shuffled, and keeps a filter that is smaller by 3 %), on (every compressed file shuffled for 8-byte elements, with or without the differences as samples say), off"},
		{Name: ParamCache, Type: mca.Int, Default: "2", Level: mca.LevelUser,
			Help: "Sequences of a snapshot reference each node keeps locally once drained, so a restart on the same node reads them instead of global storage (0 = none)"},
		{Name: ParamPartner, Type: mca.String, Default: PartnerRing, Choices: PartnerModes, Level: mca.LevelUser,
			Help: "Partner copies: ring puts each node's local snapshots into the local storage of the next node of the job's node list (the last node's into the first's) while they drain, so a restart on the partner node reads them when their node is lost; none keeps them on their own node only. A job of one node has no partner"},
		{Name: ParamXORSet, Type: mca.Int, Default: "0", Level: mca.LevelUser,
			Help: "XOR sets of this many nodes (at least 3; 0 = none), as SCR's: the job's node list is cut into sets of consecutive nodes (a last set of fewer than 3 joins the one before), each node keeps its own snapshots and 1/(k-1) of its set's parity while they drain, and a restart rebuilds a lost node's snapshots from the other members' (it needs their cached copies: keep sstore_stage_cache at 1 or more)"},
		{Name: ParamDifferential, Type: mca.Bool, Default: "off", Level: mca.LevelUser,
			Help: "Differential checkpoints: each file stored as blocks (" + ParamBlockSize + "), of which a sequence stores only those that changed since the previous committed sequence and references the others; restart reassembles and verifies each block; removing an old sequence keeps the blocks newer ones reference"},
		{Name: ParamBlockSize, Type: mca.Size, Default: "1MiB", Level: mca.LevelTuner,
			Help: "Block size of differential checkpoints (4KiB to 64MiB, a multiple of 4KiB): smaller finds more unchanged blocks and records more hashes"},
		{Name: ParamFullEvery, Type: mca.Int, Default: "8", Level: mca.LevelTuner,
			Help: "With differential checkpoints, every this many sequences one is full, which bounds how many older sequences a restart reads (1 = every one full)"},
	}
	if hooks {
		params = append(params, mca.ParamSpec{Name: ParamHoldFetch, Type: mca.String, Level: mca.LevelDev + 2,
			Help: "Test hook, not a feature: NODE:RANK:FIFO holds NODE's fetch of RANK's snapshot until the test closes the named pipe"})
	}
	return mca.NewComponent(mca.ComponentInfo{Framework: sstore.Name, Name: Name,
		Description: "Local snapshots written to node-local storage, then compressed and moved to the global snapshot folder by each node's daemon while the job runs; the last sequences stay on the nodes as a cache for restart",
		Version:     "1.0.0",
		Priority:    Priority,
		Params:      params,
	}, query)
}

// config is what a module runs with.
type config struct {
	localRoot   string // "" = snapshot.DefaultStageRoot()
	maxInflight int
	alg         string
	level       int
	shuffle     string // compress.ShuffleModes
	cache       int
	partner     string // PartnerModes
	xorSet      int    // nodes per XOR set, 0 = none
	noGlobal    bool   // snapc_base_global_snapshot_dir none
	groupRead   bool   // sstore_base_group_readable
	// Differential checkpoints (dcp.go).
	differential bool
	blockSize    int
	fullEvery    int
	hold         *fetchHold // ParamHoldFetch, in a build with the test hooks
}

// query answers when checkpoint/restart is on (ft_cr_enabled) or when
// sstore names stage explicitly; bad parameter values fail it.
func query(_ context.Context, q mca.Query) (sstore.Module, int, error) {
	if err := q.SkipUnlessCR(sstore.Name, Name); err != nil {
		return nil, 0, err
	}
	v := q.Values
	c := config{
		localRoot:   v.String(ParamLocalDir),
		maxInflight: v.Int(ParamMaxInflight),
		alg:         v.String(ParamCompress),
		level:       v.Int(ParamCompressLevel),
		shuffle:     v.String(ParamShuffle),
		cache:       v.Int(ParamCache),
		partner:     v.String(ParamPartner),
		xorSet:      v.Int(ParamXORSet),
		noGlobal:    snapc.NoGlobal(v),
		groupRead:   sstore.GroupReadable(v),

		differential: v.Bool(ParamDifferential),
		fullEvery:    v.Int(ParamFullEvery),
	}
	bs := v.Size(ParamBlockSize)
	c.blockSize = int(min(bs, blocks.MaxBlockSize+1))
	var errs []error
	if c.localRoot != "" && !filepath.IsAbs(c.localRoot) {
		errs = append(errs, fmt.Errorf("sstore/stage: %s = %q: must be an absolute path (each node's daemon resolves it, from its own working directory)", ParamLocalDir, c.localRoot))
	}
	if c.maxInflight < 1 {
		errs = append(errs, fmt.Errorf("sstore/stage: %s = %d: must be at least 1", ParamMaxInflight, c.maxInflight))
	}
	if c.xorSet != 0 && c.xorSet < xor.MinMembers {
		errs = append(errs, fmt.Errorf("sstore/stage: %s = %d: a set needs at least %d nodes (0 = no XOR sets)", ParamXORSet, c.xorSet, xor.MinMembers))
	}
	if c.xorSet > 0 && c.cache < 1 {
		errs = append(errs, fmt.Errorf("sstore/stage: %s = %d with %s = 0: a lost node is rebuilt from the other members' cached snapshots, so each must keep at least the last sequence (%s 1 or more)", ParamXORSet, c.xorSet, ParamCache, ParamCache))
	}
	if c.noGlobal && c.partner == PartnerNone && c.xorSet == 0 {
		errs = append(errs, fmt.Errorf("sstore/stage: %s = %s keeps snapshots on their own node only: set %s ring or %s (a lost node would lose the sequence)", snapc.ParamGlobalDir, snapc.GlobalNone, ParamPartner, ParamXORSet))
	}
	if c.cache < 0 {
		errs = append(errs, fmt.Errorf("sstore/stage: %s = %d: must be 0 or more", ParamCache, c.cache))
	}
	if bs < blocks.MinBlockSize || bs > blocks.MaxBlockSize || bs%blocks.MinBlockSize != 0 {
		errs = append(errs, fmt.Errorf("sstore/stage: %s = %d: must be a multiple of 4KiB from 4KiB to 64MiB", ParamBlockSize, bs))
	}
	if c.fullEvery < 1 {
		errs = append(errs, fmt.Errorf("sstore/stage: %s = %d: must be at least 1", ParamFullEvery, c.fullEvery))
	}
	if c.differential && c.noGlobal {
		errs = append(errs, fmt.Errorf("sstore/stage: %s applies to what drains to global storage, and %s = %s has none: drop one of them", ParamDifferential, snapc.ParamGlobalDir, snapc.GlobalNone))
	}
	if _, err := compress.LevelsOf(c.alg); err != nil {
		errs = append(errs, fmt.Errorf("sstore/stage: %s = %q: %w", ParamCompress, c.alg, err))
	} else if err := compress.Check(c.alg, c.level); err != nil {
		errs = append(errs, fmt.Errorf("sstore/stage: %s = %d: %w", ParamCompressLevel, c.level, err))
	}
	if v.Has(ParamHoldFetch) && v.String(ParamHoldFetch) != "" {
		h, err := parseHoldFetch(v.String(ParamHoldFetch))
		errs = append(errs, err)
		c.hold = h
	}
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	return newModule(c), q.Priority, nil
}

// checkName refuses what cannot be one element of a local path.
func checkName(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\x00") {
		return fmt.Errorf("%s %q cannot name a folder", what, s)
	}
	return nil
}

// module is one process's stage. Its files-in-flight bound is shared by
// every Sync and Fetch of the node.
type module struct {
	cfg config
	sem chan struct{}

	mu      sync.Mutex
	bound   bool
	env     sstore.Host
	log     *slog.Logger
	nodeDir string
	active  map[syncKey]int // sequences being drained, which eviction spares
	temps   map[string]bool // temporary folders in use, which sweep spares
}

type syncKey struct {
	ref string
	seq int
}

func newModule(c config) *module {
	return &module{cfg: c, sem: make(chan struct{}, c.maxInflight), active: map[syncKey]int{}, temps: map[string]bool{}}
}

// Provision gives the module its node and FileM. A tool (node "") stages
// under the host's name. FileM may be nil in a process that only writes
// local snapshots; Sync and Fetch then fail.
func (m *module) Provision(_ context.Context, env sstore.Host) error {
	node := env.Node
	if node == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("sstore/stage: provision: no node name given and the host name is unknown: %w", err)
		}
		node = h
	}
	if err := checkName("node name", node); err != nil {
		return fmt.Errorf("sstore/stage: provision: %w", err)
	}
	log := env.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bound, m.env, m.log = true, env, log.With("sstore", Name, "node", node)
	m.nodeDir = snapshot.StageNodeDir(m.cfg.localRoot, node)
	return nil
}

// binding returns the module's Host and node folder, or an error when the
// process never bound it.
func (m *module) binding(op string) (sstore.Host, string, *slog.Logger, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.bound {
		return sstore.Host{}, "", nil, fmt.Errorf("sstore/stage: %s: the module was not bound to its node (the hosting process must provision it with an sstore.Host, the node's name and FileM, after selection)", op)
	}
	return m.env, m.nodeDir, m.log, nil
}

// prepare checks a call's reference and sequence and makes sure the node
// folder exists and is this user's.
func (m *module) prepare(op string, ref snapshot.Ref, seq int) (sstore.Host, string, *slog.Logger, error) {
	env, nodeDir, log, err := m.binding(op)
	if err != nil {
		return env, "", nil, err
	}
	if err := checkName("snapshot reference", ref.Name); err != nil {
		return env, "", nil, fmt.Errorf("sstore/stage: %s: %w", op, err)
	}
	if seq < 0 {
		return env, "", nil, fmt.Errorf("sstore/stage: %s: bad sequence %d", op, seq)
	}
	if err := m.ensureNodeDir(nodeDir); err != nil {
		return env, "", nil, fmt.Errorf("sstore/stage: %s: %w", op, err)
	}
	return env, nodeDir, log, nil
}

// ensureNodeDir creates the node's folder. The shared default root in the
// temporary directory must be a directory of this user, so that nobody
// else can plant a link or read the snapshots there.
func (m *module) ensureNodeDir(nodeDir string) error {
	if err := os.MkdirAll(nodeDir, 0o700); err != nil {
		return fmt.Errorf("create node-local folder: %w (set %s to a writable node-local folder)", err, ParamLocalDir)
	}
	if m.cfg.localRoot != "" {
		return nil
	}
	root := snapshot.DefaultStageRoot()
	fi, err := os.Lstat(root)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s is not a directory of this user; remove it or set %s", root, ParamLocalDir)
	}
	return nil
}

// LocalDir creates rank's node-local snapshot folder of seq, empty: what an
// attempt that never drained left there is replaced.
func (m *module) LocalDir(ctx context.Context, ref snapshot.Ref, seq, rank int) (string, error) {
	op := fmt.Sprintf("local folder of rank %d of %s seq %d", rank, ref.Name, seq)
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("sstore/stage: %s: %w", op, err)
	}
	if rank < 0 {
		return "", fmt.Errorf("sstore/stage: %s: bad rank", op)
	}
	_, nodeDir, _, err := m.prepare(op, ref, seq)
	if err != nil {
		return "", err
	}
	dir := snapshot.StageLocalDir(nodeDir, ref, seq, rank)
	for _, d := range []string{dir, xorDir(nodeDir, ref, seq)} { // the XOR set's part of an attempt that failed goes too
		if err := os.RemoveAll(d); err != nil {
			return "", fmt.Errorf("sstore/stage: clear %s: %w", d, err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("sstore/stage: create %s: %w (set %s to a node-local folder with room)", dir, err, ParamLocalDir)
	}
	return dir, nil
}

// Remove deletes this node's local copies of seq; global storage is the
// coordinator's.
func (m *module) Remove(ctx context.Context, ref snapshot.Ref, seq int) error {
	op := fmt.Sprintf("remove local copies of %s seq %d", ref.Name, seq)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sstore/stage: %s: %w", op, err)
	}
	_, nodeDir, _, err := m.prepare(op, ref, seq)
	if err != nil {
		return err
	}
	dir := snapshot.StageSeqDir(nodeDir, ref, seq)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("sstore/stage: %s: %w", op, err)
	}
	// The reference's folder goes with its last sequence.
	if err := os.Remove(filepath.Dir(dir)); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("sstore/stage: %s: %w", op, err)
	}
	return nil
}

// acquire takes one of the node's in-flight slots.
func (m *module) acquire(ctx context.Context) error {
	select {
	case m.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *module) release() { <-m.sem }

// remoteHint explains a FileM error that shows the global folder cannot
// be reached: with raw selected, a remote folder never can.
func remoteHint(ref snapshot.Ref, err error) error {
	if err == nil || !ref.IsRemote() || !errors.Is(err, filem.ErrUnreachable) {
		return err
	}
	return fmt.Errorf("global snapshot folder %s is remote: run with --mca filem sftp (or rsh) if filem is raw, else check that the host is up and reachable: %w", ref.Dir, err)
}

var (
	_ sstore.Module                = (*module)(nil)
	_ mca.Provisioner[sstore.Host] = (*module)(nil)
)
