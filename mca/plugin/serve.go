package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/filem"
	"gompi/mca"
	pb "gompi/mca/plugin/proto"
)

// Served is a component a plugin binary carries; make one with FileM or CRS.
type Served struct {
	info  func() mca.ComponentInfo
	add   func(set *frameworks.Set) error
	query func(ctx context.Context, q mca.Query) (any, int, error)
}

// FileM serves a FileM component.
func FileM(c mca.Component[filem.Module]) Served {
	return Served{
		info: c.Info,
		add:  func(set *frameworks.Set) error { return set.FileM.Add(c) },
		query: func(ctx context.Context, q mca.Query) (any, int, error) {
			m, prio, err := c.Query(ctx, q)
			return m, prio, err
		},
	}
}

// CRS serves a CRS component.
func CRS(c mca.Component[crs.Module]) Served {
	return Served{
		info: c.Info,
		add:  func(set *frameworks.Set) error { return set.CRS.Add(c) },
		query: func(ctx context.Context, q mca.Query) (any, int, error) {
			m, prio, err := c.Query(ctx, q)
			return m, prio, err
		},
	}
}

// Serve runs a plugin binary carrying components until the host stops it.
// Call it from main; it does not return while the host is connected. Run
// by hand (not by a gompi host) the binary says it is a plugin and exits.
// Log records of the components reach the host's log at their level.
func Serve(components ...Served) {
	// A host killed outright (SIGKILL) cannot Close its plugins; the kernel
	// ends them with it. A plugin holds nothing worth a graceful exit.
	parent := os.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err == nil && os.Getppid() != parent {
		os.Exit(1) // the host died before the request took effect
	}
	level := hclog.LevelFromString(os.Getenv(envLogLevel))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	// hclog keeps this *os.File: go-plugin later replaces os.Stderr with a
	// pipe, but log lines must reach the real stderr the host reads.
	hl := hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: level})
	srv, err := newServer(slog.New(&slogToHCLog{l: hl}), components)
	if err != nil {
		hl.Error("plugin cannot serve its components", "error", err)
		os.Exit(1)
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         goplugin.PluginSet{pluginKey: &bridge{srv: srv}},
		GRPCServer:      goplugin.DefaultGRPCServer,
		Logger:          hl,
	})
}

type compKey struct{ framework, name string }

func (k compKey) String() string { return k.framework + "/" + k.name }

type heldModule struct {
	comp compKey
	m    any
}

// server is the plugin side: its own parameters and frameworks, the
// components it serves and the modules their queries made.
type server struct {
	params *mca.Params
	log    *slog.Logger
	order  []compKey
	comps  map[compKey]Served

	mu      sync.Mutex
	next    uint64
	modules map[uint64]heldModule
}

func newServer(log *slog.Logger, components []Served) (*server, error) {
	params := mca.NewParams()
	set := frameworks.New(params)
	s := &server{params: params, log: log, comps: map[compKey]Served{}, modules: map[uint64]heldModule{}}
	for _, c := range components {
		if c.add == nil {
			return nil, errors.New("plugin: a zero Served; make each with plugin.FileM or plugin.CRS")
		}
		if err := c.add(set); err != nil {
			return nil, err
		}
		info := c.info()
		k := compKey{info.Framework, info.Name}
		s.order = append(s.order, k)
		s.comps[k] = c
	}
	return s, nil
}

func keyOf(r *pb.ComponentRef) compKey { return compKey{r.GetFramework(), r.GetName()} }

func (s *server) component(r *pb.ComponentRef) (Served, error) {
	c, ok := s.comps[keyOf(r)]
	if !ok {
		return c, status.Errorf(codes.NotFound, "plugin: no component %s in this plugin", keyOf(r))
	}
	return c, nil
}

// module returns the module a query of component r made.
func (s *server) module(r *pb.ComponentRef, id uint64) (any, error) {
	s.mu.Lock()
	h, ok := s.modules[id]
	s.mu.Unlock()
	if !ok || h.comp != keyOf(r) {
		return nil, status.Errorf(codes.NotFound, "plugin: component %s has no module %d; query it first", keyOf(r), id)
	}
	return h.m, nil
}

type pluginServer struct {
	*server
	pb.UnimplementedPluginServer
}

func (s pluginServer) Describe(context.Context, *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	resp := &pb.DescribeResponse{}
	for _, k := range s.order {
		resp.Components = append(resp.Components, describe(s.comps[k].info()))
	}
	return resp, nil
}

func (s pluginServer) Query(ctx context.Context, req *pb.QueryRequest) (*pb.QueryResponse, error) {
	c, err := s.component(req.GetComponent())
	if err != nil {
		return nil, err
	}
	vals, err := s.params.ResolveSettings(settingsFromPB(req.GetSettings()))
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, fmt.Sprintf("plugin: %s: %v", keyOf(req.GetComponent()), err))
	}
	k := keyOf(req.GetComponent())
	m, prio, err := c.query(ctx, mca.Query{Values: vals, Role: mca.Role(req.GetRole()),
		Logger: s.log.With("framework", k.framework, "component", k.name), Priority: int(req.GetPriority())})
	switch {
	case errors.Is(err, mca.ErrSkip):
		return &pb.QueryResponse{Skipped: true, SkipReason: []byte(err.Error())}, nil
	case err != nil:
		return nil, toStatus(err)
	}
	s.mu.Lock()
	s.next++
	id := s.next
	s.modules[id] = heldModule{comp: k, m: m}
	s.mu.Unlock()
	return &pb.QueryResponse{Priority: int32(prio), Module: id}, nil
}

type filemServer struct {
	*server
	pb.UnimplementedFileMServer
}

func (s filemServer) filem(r *pb.ComponentRef, id uint64) (filem.Module, error) {
	m, err := s.module(r, id)
	if err != nil {
		return nil, err
	}
	fm, ok := m.(filem.Module)
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "plugin: component %s is not a FileM component", keyOf(r))
	}
	return fm, nil
}

func (s filemServer) Put(ctx context.Context, req *pb.TransferRequest) (*pb.Empty, error) {
	m, err := s.filem(req.GetComponent(), req.GetModule())
	if err != nil {
		return nil, err
	}
	return &pb.Empty{}, toStatus(m.Put(ctx, transfersFromPB(req.GetTransfers())))
}

func (s filemServer) Get(ctx context.Context, req *pb.TransferRequest) (*pb.Empty, error) {
	m, err := s.filem(req.GetComponent(), req.GetModule())
	if err != nil {
		return nil, err
	}
	return &pb.Empty{}, toStatus(m.Get(ctx, transfersFromPB(req.GetTransfers())))
}

func (s filemServer) Remove(ctx context.Context, req *pb.RemoveRequest) (*pb.Empty, error) {
	m, err := s.filem(req.GetComponent(), req.GetModule())
	if err != nil {
		return nil, err
	}
	return &pb.Empty{}, toStatus(m.Remove(ctx, remotesFromPB(req.GetPaths())))
}

type crsServer struct {
	*server
	pb.UnimplementedCRSServer
}

func (s crsServer) crs(r *pb.ComponentRef, id uint64) (crs.Module, error) {
	m, err := s.module(r, id)
	if err != nil {
		return nil, err
	}
	cm, ok := m.(crs.Module)
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "plugin: component %s is not a CRS component", keyOf(r))
	}
	return cm, nil
}

func (s crsServer) Checkpoint(ctx context.Context, req *pb.CheckpointRequest) (*pb.CheckpointResponse, error) {
	m, err := s.crs(req.GetComponent(), req.GetModule())
	if err != nil {
		return nil, err
	}
	res, err := m.Checkpoint(ctx, crs.CheckpointRequest{PID: int(req.GetPid()), Dir: string(req.GetDir()),
		Options: crs.Options{Term: req.GetOptions().GetTerm(), Stop: req.GetOptions().GetStop()}})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.CheckpointResponse{State: int32(res.State), Files: bytesOf(res.Files), Meta: res.Meta}, nil
}

func (s crsServer) Restart(ctx context.Context, req *pb.RestartRequest) (*pb.Launch, error) {
	m, err := s.crs(req.GetComponent(), req.GetModule())
	if err != nil {
		return nil, err
	}
	l, err := m.Restart(ctx, crs.RestartRequest{Dir: string(req.GetDir()), Meta: req.GetMeta(), Launch: launchFromPB(req.GetLaunch())})
	if err != nil {
		return nil, toStatus(err)
	}
	return launchToPB(l), nil
}

var (
	_ pb.PluginServer = pluginServer{}
	_ pb.FileMServer  = filemServer{}
	_ pb.CRSServer    = crsServer{}
)
