package plugin

import (
	"context"
	"slices"
	"strings"

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

// adapter is one framework's half of the bridge: the only code that knows
// the framework's interfaces (one bridge_<framework>.go each).
type adapter struct {
	// methods dispatch calls to a module of the framework (plugin side).
	methods methods
	// extended says whether a module implements its framework's optional
	// interface: its Host's Provisioner (crs, sstore, errmgr) or
	// snapc.Coordinator; nil when the framework has none.
	extended func(m any) bool
	// optional names further optional interfaces a module may implement
	// (crs.Restorer), each with its test; a proxy module implements those
	// its module does.
	optional map[string]func(m any) bool
	// carrier makes the host's proxies of the framework's components.
	carrier
}

// carrier makes and registers the proxy of a plugin's component (host
// side).
type carrier struct {
	// component returns the proxy: an mca.Component of the framework.
	component func(c proxyComponent) any
	// add adds a proxy component to its framework in set.
	add func(set *frameworks.Set, comp any) error
}

// The frameworks a plugin can carry: those whose modules run in gompirun
// or gompid.
var adapters = map[string]adapter{
	filem.Name:  filemAdapter,
	crs.Name:    crsAdapter,
	sstore.Name: sstoreAdapter,
	errmgr.Name: errmgrAdapter,
	plm.Name:    plmAdapter,
	snapc.Name:  snapcAdapter,
}

// carried lists the frameworks of adapters, for messages.
func carried() string {
	var names []string
	for n := range adapters {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// implExtended in a QueryResponse says the module implements its
// framework's optional interface.
const implExtended = "extended"

// proxyComponent is the host's stand-in for a component of a plugin.
type proxyComponent struct {
	p    *proc
	info mca.ComponentInfo
	ref  *pb.ComponentRef
}

// proxy is a proxyComponent of a framework whose modules are M: wrap makes
// the framework's proxy module of a module's handle.
type proxy[M any] struct {
	proxyComponent
	wrap func(r *remote, extended bool) M
}

func (c *proxy[M]) Info() mca.ComponentInfo { return c.info }

// Query forwards the query with every setting the host resolved.
func (c *proxy[M]) Query(ctx context.Context, q mca.Query) (M, int, error) {
	var zero M
	id, prio, impl, err := c.p.query(ctx, c.ref, q)
	if err != nil {
		return zero, 0, err
	}
	r := &remote{p: c.p, ref: c.ref, handle: id, impl: impl}
	return c.wrap(r, slices.Contains(impl, implExtended)), prio, nil
}

// carry is the carrier of the framework fw returns, whose proxy modules
// wrap makes.
func carry[M any](fw func(*frameworks.Set) *mca.Framework[M], wrap func(r *remote, extended bool) M) carrier {
	return carrier{
		component: func(c proxyComponent) any { return &proxy[M]{proxyComponent: c, wrap: wrap} },
		add:       func(set *frameworks.Set, comp any) error { return fw(set).Add(comp.(*proxy[M])) },
	}
}

// none is the result (or arguments) of a method that has none.
type none = struct{}
