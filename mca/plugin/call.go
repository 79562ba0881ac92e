package plugin

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "gompi/mca/plugin/proto"
)

// The one bridge: every framework's module calls cross as Plugin.Call
// (host to plugin) and every host object a module is given crosses as
// Callbacks.Call (plugin to host), both naming an object by handle, a
// method by name and carrying gob-encoded arguments and result. Each
// framework's adapter (bridge_<framework>.go) holds the two halves of
// that framework: the methods table that dispatches a call to the real
// object, and the proxy type that implements the framework's interfaces by
// making calls.
//
// The payloads are encoding/gob: it moves Go values as they are, strings
// byte for byte (paths, argv and environment need not be UTF-8, which JSON
// would mangle), time.Time, durations and maps without tags or mirror
// messages, and needs nothing beyond the standard library. Both sides are
// built from the same Go types, so gob's lack of a cross-language schema
// costs nothing; the one thing it loses, an empty slice becoming nil, no
// framework's contract distinguishes.

// bound is which deadline a call has on the host side.
type bound int

const (
	control   bound = iota // mca_base_component_plugin_timeout
	dataIO                 // mca_base_component_plugin_io_timeout (calls that may rightly take long)
	unbounded              // the caller's context only (a PLM daemon's Wait)
)

// caller makes calls on one object on the other side of the bridge: a
// module in a plugin (remote) or an object of the host (hostObject).
type caller interface {
	call(ctx context.Context, b bound, method string, args, reply any) error
}

// closeMethod closes an object (io.Closer) and releases its handle.
const closeMethod = "Close"

func encode(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	if t := reflect.TypeOf(v); t.Kind() == reflect.Struct && t.NumField() == 0 {
		return nil, nil // nothing to say (gob refuses a struct without fields)
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return nil, fmt.Errorf("plugin: encode %T: %w", v, err)
	}
	return buf.Bytes(), nil
}

func decode(b []byte, v any) error {
	if v == nil || len(b) == 0 {
		return nil
	}
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(v); err != nil {
		return fmt.Errorf("plugin: decode %T: %w", v, err)
	}
	return nil
}

// method is one method of an object as the bridge calls it: it decodes its
// arguments, calls the object and returns what to send back (with an error
// the object returned, a result may still be sent: errmgr's status vector).
type method func(ctx context.Context, obj any, args []byte, sc *scope) (any, error)

// methods is an object's dispatch table, by method name.
type methods map[string]method

// fn makes a method of f, for objects of type O and arguments of type A.
func fn[O, A, R any](f func(ctx context.Context, o O, a A, sc *scope) (R, error)) method {
	return func(ctx context.Context, obj any, args []byte, sc *scope) (any, error) {
		o, ok := obj.(O)
		if !ok {
			var want *O
			return nil, fmt.Errorf("plugin: object %T is not a %v", obj, reflect.TypeOf(want).Elem())
		}
		var a A
		if err := decode(args, &a); err != nil {
			return nil, err
		}
		r, err := f(ctx, o, a, sc)
		return r, err
	}
}

// dispatch runs method name of obj and makes the response.
func dispatch(ctx context.Context, ms methods, obj any, req *pb.CallRequest, sc *scope) (*pb.CallResponse, error) {
	m, ok := ms[req.GetMethod()]
	if !ok {
		return nil, status.Errorf(codes.Unimplemented, "plugin: %T has no method %q", obj, req.GetMethod())
	}
	res, err := m(ctx, obj, req.GetArgs(), sc)
	b, eerr := encode(res)
	if eerr != nil {
		return nil, status.Error(codes.Internal, eerr.Error())
	}
	resp := &pb.CallResponse{Result: b}
	if err != nil {
		resp.Error = detailOf(err)
	}
	return resp, nil
}

// result decodes a call's response into reply and returns the object's
// error, rebuilt.
func result(resp *pb.CallResponse, reply any) error {
	err := decode(resp.GetResult(), reply)
	if d := resp.GetError(); d != nil {
		return fromDetail(d)
	}
	return err
}

// object is an object one side holds for the other: a module, a daemon
// a module launched, or an object of a module's host.
type object struct {
	comp    compKey // the component it belongs to (plugin side)
	v       any
	methods methods
	parent  uint64 // released with it (plugin side; 0 for a module)
}

// objects is a table of objects by handle, safe for concurrent use.
type objects struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]object
}

func (t *objects) add(o object) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[uint64]object{}
	}
	t.next++
	t.m[t.next] = o
	return t.next
}

func (t *objects) get(id uint64) (object, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.m[id]
	return o, ok
}

// release removes the objects and the objects they made.
func (t *objects) release(ids ...uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		delete(t.m, id)
		for k, o := range t.m {
			if o.parent == id {
				delete(t.m, k)
			}
		}
	}
}

// scope is what a method may use besides its object and arguments: on the
// plugin side, the server (to hold the objects a call makes, a PLM's
// daemons) and the host's objects a call names (a module's Host).
type scope struct {
	srv    *server // nil on the host side
	comp   compKey
	handle uint64 // the called object's
	cbID   uint32 // the broker id of the host's Callbacks
}

// hold keeps an object the called one made; it is released with it.
func (sc *scope) hold(v any, ms methods) uint64 {
	return sc.srv.objs.add(object{comp: sc.comp, v: v, methods: ms, parent: sc.handle})
}

// host returns a caller of the host's object id (nil for id 0: the host
// gave none).
func (sc *scope) host(id uint64) (caller, error) {
	if id == 0 {
		return nil, nil
	}
	if sc.srv == nil {
		return nil, errors.New("plugin: a host object handed back to the host")
	}
	c, err := sc.srv.callbacks(sc.cbID)
	if err != nil {
		return nil, err
	}
	return hostObject{c: c, handle: id}, nil
}

// hostObject is the plugin side's caller of an object of the host.
type hostObject struct {
	c      pb.CallbacksClient
	handle uint64
}

// call calls back the host. It has no bound of its own: the host's call
// that handed the object over has one, and the plugin dies with its host.
func (h hostObject) call(ctx context.Context, _ bound, method string, args, reply any) error {
	payload, err := encode(args)
	if err != nil {
		return err
	}
	resp, err := h.c.Call(ctx, &pb.CallRequest{Handle: h.handle, Method: method, Args: payload})
	if err != nil {
		if ce := componentError(err); ce != nil {
			return ce
		}
		if ctx.Err() != nil {
			return fmt.Errorf("plugin: call %s of the host: %w", method, ctx.Err())
		}
		return fmt.Errorf("plugin: call %s of the host: %w", method, err)
	}
	return result(resp, reply)
}

// callbacks returns the client of the host's Callbacks, dialing it through
// the broker the first time.
func (s *server) callbacks(id uint32) (pb.CallbacksClient, error) {
	s.dialMu.Lock()
	defer s.dialMu.Unlock()
	if s.hostConn == nil {
		if s.broker == nil || id == 0 {
			return nil, errors.New("plugin: the host serves no callbacks")
		}
		conn, err := s.broker.Dial(id)
		if err != nil {
			return nil, fmt.Errorf("plugin: dial the host's callbacks: %w", err)
		}
		s.hostConn = conn
	}
	return pb.NewCallbacksClient(s.hostConn), nil
}

// Call runs a method of a module or of an object a module made.
func (s pluginServer) Call(ctx context.Context, req *pb.CallRequest) (*pb.CallResponse, error) {
	k := keyOf(req.GetComponent())
	o, ok := s.objs.get(req.GetHandle())
	if !ok || o.comp != k {
		return nil, status.Errorf(codes.NotFound, "plugin: component %s has no object %d; query it first", k, req.GetHandle())
	}
	if req.GetMethod() == closeMethod {
		s.objs.release(req.GetHandle())
		resp := &pb.CallResponse{}
		if c, ok := o.v.(interface{ Close() error }); ok {
			if err := c.Close(); err != nil {
				resp.Error = detailOf(err)
			}
		}
		return resp, nil
	}
	return dispatch(ctx, o.methods, o.v, req, &scope{srv: s.server, comp: k, handle: req.GetHandle(), cbID: req.GetCallbacks()})
}

// hostCallbacks is the host's table of the objects it handed to its
// plugins' modules, served on a brokered connection.
type hostCallbacks struct {
	id   uint32 // broker id the plugin dials
	objs objects
}

// serveCallbacks serves the host's objects to the plugin; it returns once
// the plugin's broker is closed (the plugin has exited or was killed).
func serveCallbacks(broker *goplugin.GRPCBroker, cb *hostCallbacks) {
	broker.AcceptAndServe(cb.id, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(opts...)
		pb.RegisterCallbacksServer(s, callbackServer{cb: cb})
		return s
	})
}

type callbackServer struct {
	cb *hostCallbacks
	pb.UnimplementedCallbacksServer
}

func (s callbackServer) Call(ctx context.Context, req *pb.CallRequest) (*pb.CallResponse, error) {
	o, ok := s.cb.objs.get(req.GetHandle())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "plugin host: no object %d (released?)", req.GetHandle())
	}
	return dispatch(ctx, o.methods, o.v, req, &scope{})
}

// remote is the host's handle of a module in a plugin (or of an object a
// module made): what the framework's proxy makes its calls through.
type remote struct {
	p      *proc
	ref    *pb.ComponentRef
	handle uint64
	impl   []string // optional interfaces the module implements (QueryResponse.implements)

	mu     sync.Mutex
	lent   []uint64 // host objects handed to the module, released on Close
	closed bool
}

func (r *remote) name() string { return r.ref.GetFramework() + "/" + r.ref.GetName() }

func (r *remote) call(ctx context.Context, b bound, method string, args, reply any) error {
	return r.p.invoke(ctx, b, r.ref, r.handle, r.name(), method, args, reply)
}

// child is the handle of an object the module made.
func (r *remote) child(handle uint64) *remote {
	return &remote{p: r.p, ref: r.ref, handle: handle}
}

// lend hands v to the module as a host object with methods ms; it stays
// the module's until Close (or until replaced with unlend).
func (r *remote) lend(v any, ms methods) uint64 {
	id := r.p.cb.objs.add(object{v: v, methods: ms})
	r.mu.Lock()
	r.lent = append(r.lent, id)
	r.mu.Unlock()
	return id
}

// unlend releases host objects lent for one call or an earlier provision.
func (r *remote) unlend(ids ...uint64) {
	r.p.cb.objs.release(ids...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lent = slicesDelete(r.lent, ids)
}

func slicesDelete(from, ids []uint64) []uint64 {
	out := from[:0]
	for _, x := range from {
		drop := false
		for _, id := range ids {
			drop = drop || x == id
		}
		if !drop {
			out = append(out, x)
		}
	}
	return out
}

// Close closes the module in the plugin and releases what the host lent
// it. A plugin that has exited holds nothing any more: that is no error.
func (r *remote) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	lent := r.lent
	r.lent = nil
	r.mu.Unlock()
	r.p.cb.objs.release(lent...)
	if r.p.exited() {
		return nil
	}
	err := r.call(context.Background(), control, closeMethod, nil, nil)
	if errors.Is(err, ErrPluginDied) {
		return nil
	}
	return err
}

// invoke makes one Plugin.Call under the bound b.
func (p *proc) invoke(ctx context.Context, b bound, ref *pb.ComponentRef, handle uint64, comp, method string, args, reply any) error {
	payload, err := encode(args)
	if err != nil {
		return err
	}
	var resp *pb.CallResponse
	rpc := func(ctx context.Context) (err error) {
		resp, err = p.c.plugin.Call(ctx, &pb.CallRequest{Component: ref, Handle: handle, Method: method, Args: payload,
			Callbacks: p.cb.id})
		return err
	}
	op := strings.ToLower(method)
	switch b {
	case control:
		err = p.call(ctx, op, comp, rpc)
	case dataIO:
		err = p.ioCall(ctx, op, comp, rpc)
	default:
		err = p.callWithin(ctx, 0, "", op, comp, rpc)
	}
	if err != nil {
		return err
	}
	if err := result(resp, reply); err != nil {
		if resp.GetError() == nil {
			return fmt.Errorf("plugin %s: %s %s: %w", p.path, op, comp, err)
		}
		return err
	}
	return nil
}
