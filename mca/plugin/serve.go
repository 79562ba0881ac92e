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
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/filem"
	"gompi/frameworks/plm"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/mca"
	pb "gompi/mca/plugin/proto"
)

// Served is a component a plugin binary carries; make one with the
// function of its framework (FileM, CRS, SStore, SnapC, ErrMgr, PLM).
type Served struct {
	info  func() mca.ComponentInfo
	add   func(set *frameworks.Set) error
	query func(ctx context.Context, q mca.Query) (any, int, error)
	// adapter is its framework's half of the bridge.
	adapter adapter
}

// serve makes the Served of component c of the framework fw returns.
func serve[M any](c mca.Component[M], fw func(*frameworks.Set) *mca.Framework[M]) Served {
	info := c.Info()
	return Served{
		info:    c.Info,
		add:     func(set *frameworks.Set) error { return fw(set).Add(c) },
		adapter: adapters[info.Framework],
		query: func(ctx context.Context, q mca.Query) (any, int, error) {
			m, prio, err := c.Query(ctx, q)
			return m, prio, err
		},
	}
}

// FileM serves a FileM component.
func FileM(c mca.Component[filem.Module]) Served {
	return serve(c, func(s *frameworks.Set) *mca.Framework[filem.Module] { return s.FileM })
}

// CRS serves a CRS component.
func CRS(c mca.Component[crs.Module]) Served {
	return serve(c, func(s *frameworks.Set) *mca.Framework[crs.Module] { return s.CRS })
}

// SStore serves an SStore component.
func SStore(c mca.Component[sstore.Module]) Served {
	return serve(c, func(s *frameworks.Set) *mca.Framework[sstore.Module] { return s.SStore })
}

// ErrMgr serves an ErrMgr component.
func ErrMgr(c mca.Component[errmgr.Module]) Served {
	return serve(c, func(s *frameworks.Set) *mca.Framework[errmgr.Module] { return s.ErrMgr })
}

// PLM serves a PLM component.
func PLM(c mca.Component[plm.Module]) Served {
	return serve(c, func(s *frameworks.Set) *mca.Framework[plm.Module] { return s.PLM })
}

// SnapC serves a SnapC component.
func SnapC(c mca.Component[snapc.Module]) Served {
	return serve(c, func(s *frameworks.Set) *mca.Framework[snapc.Module] { return s.SnapC })
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

// server is the plugin side: its own parameters and frameworks, the
// components it serves and the modules their queries made.
type server struct {
	params *mca.Params
	log    *slog.Logger
	order  []compKey
	comps  map[compKey]Served

	// objs are the modules queries made and the objects they made, by
	// handle.
	objs objects

	// broker reaches the host's Callbacks (set by GRPCServer); hostConn
	// is dialed the first time a call hands over a host object.
	broker   *goplugin.GRPCBroker
	dialMu   sync.Mutex
	hostConn *grpc.ClientConn

	// fds receives the descriptors the host passes with a call (a CRS's
	// Restore); the call takes and closes them.
	fds *fdReceiver
}

func newServer(log *slog.Logger, components []Served) (*server, error) {
	params := mca.NewParams()
	set := frameworks.New(params)
	s := &server{params: params, log: log, comps: map[compKey]Served{}, fds: newFDReceiver()}
	for _, c := range components {
		if c.add == nil {
			return nil, errors.New("plugin: a zero Served; make each with its framework's function (plugin.FileM, plugin.SStore, ...)")
		}
		if c.adapter.methods == nil {
			return nil, fmt.Errorf("plugin: framework %s cannot be carried by a plugin", c.info().Framework)
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
	h, ok := s.objs.get(id)
	if !ok || h.comp != keyOf(r) {
		return nil, status.Errorf(codes.NotFound, "plugin: component %s has no module %d; query it first", keyOf(r), id)
	}
	return h.v, nil
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
	var note string
	m, prio, err := c.query(ctx, mca.Query{Values: vals, Role: mca.Role(req.GetRole()),
		Logger: s.log.With("framework", k.framework, "component", k.name), Priority: int(req.GetPriority()),
		Note: func(s string) { note = s }})
	switch {
	case errors.Is(err, mca.ErrSkip):
		return &pb.QueryResponse{Skipped: true, SkipReason: []byte(err.Error())}, nil
	case err != nil:
		return nil, toStatus(err)
	}
	id := s.objs.add(object{comp: k, v: m, methods: c.adapter.methods})
	var impl []string
	if c.adapter.extended != nil && c.adapter.extended(m) {
		impl = append(impl, implExtended)
	}
	for name, ok := range c.adapter.optional {
		if ok(m) {
			impl = append(impl, name)
		}
	}
	return &pb.QueryResponse{Priority: int32(prio), Module: id, Implements: impl, Note: []byte(note)}, nil
}

var _ pb.PluginServer = pluginServer{}
