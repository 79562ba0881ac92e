// Package plugin is the bridge to out-of-process components: plugin
// binaries, started with hashicorp/go-plugin and spoken to over gRPC, whose
// components join a process's frameworks beside the built-in ones and are
// selected the same way.
//
// The host side is Load: it finds gompi-plugin-* executables on
// mca_base_component_path, checks their pinned checksums, starts them, asks
// each what it carries (Describe) and adds one proxy component per
// described component with Framework.Add. A proxy forwards Query with all
// the host's resolved settings; the module it returns is a proxy too, whose
// methods (and Close) are calls on the module in the plugin.
//
// There is one bridge for every framework it carries: Plugin.Call names a
// module (or an object a module made, such as a PLM's daemon) by handle, a
// method by name, and carries the arguments and result encoded with
// encoding/gob; the objects of a module's host cross the other way, as
// Callbacks.Call on a connection go-plugin's broker opens from the plugin
// to the host. Each framework's adapter (bridge_<framework>.go) is the
// only code that knows its interfaces: the methods table that dispatches a
// call to the real object, and the proxy that makes calls. The frameworks
// carried are those whose modules run in gompirun or gompid:
//
//   - filem: Put, Get, Remove.
//
//   - crs: Checkpoint, Restart, and Restore when the module is a
//     crs.Restorer (the proxy then is one too); its Host crosses as
//     crs.Host says: a rank's Save is lent, a daemon's node passed. A
//     Restore's descriptors are passed as descriptors (SCM_RIGHTS on a
//     unix socket pair the host makes at the plugin's start, the plugin's
//     end its descriptor 3); the restored processes stay the plugin's,
//     held by handle, Wait a call on them bounded by its context.
//
//   - sstore: LocalDir, Sync, Fetch, Remove; its Host crosses as the node's
//     name and the host's FileM, lent to the module (the module's FileM
//     calls come back to the host), and a Sync's progress callback is lent
//     for that call.
//
//   - errmgr: Handle (fault and status vector there, decision and vector
//     back); its Host crosses as gompirun's job, lent with exactly the
//     optional interfaces it implements (Recoverer, Migrator).
//
//   - plm: Network, Launch; Spec.Stderr is lent (the daemons' output comes
//     back to it), the daemons are the plugin's children and come back as
//     handles with their node and PID, and Wait and Kill are calls on them.
//
//   - snapc: Checkpoint; a Coordinator's NewGlobal and NewLocal make
//     coordinators the plugin holds by handle, their methods calls; the
//     global's NodeLink and MetaStore and the local's AppPort, Store and
//     Notify are lent, the job's Values cross as settings. Its calls are
//     many in every checkpoint (each node's request and reply crosses
//     twice), so a plugin coordinator is for one that must live out of
//     process, not for speed.
//
// btl, crcp and inc run inside a rank and stay in process for good.
//
// No file contents or snapshot bytes cross the bridge, only paths, PIDs,
// options and small metadata. Component errors come back with their text
// and with the sentinel errors of the frameworks (crs.ErrNoProcess,
// filem.ErrUnreachable, sstore.ErrDisabled, snapshot.ErrCorrupt,
// errmgr.ErrJobOver, plm.ErrLaunch, fs.ErrNotExist, mca.ErrSkip, context
// errors, ...), filem.TransferErrors and plm.ExitError intact, so
// errors.Is and errors.As work as they do in process (other error types
// keep their text and their sentinels, not their type). Control calls
// have a deadline (mca_base_component_plugin_timeout), calls that may
// rightly take long (moving files, checkpointing, a Sync, an ErrMgr's
// Handle, a Launch) the I/O one (mca_base_component_plugin_io_timeout),
// and a PLM daemon's Wait none but the plugin's life; a plugin that dies
// makes calls fail with ErrPluginDied; neither brings the host down.
//
// The plugin side is Serve, called from a plugin binary's main with the
// components it carries (FileM, CRS, SStore, SnapC, ErrMgr, PLM). It keeps its own
// parameter table, so the plugin's components resolve their parameters
// from the host's settings with Params.ResolveSettings. It holds the
// modules of the host's queries by handle until the host closes them;
// objects a module made (daemons) are released with it.
package plugin

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "gompi/mca/plugin/proto"
)

// ErrPluginDied is wrapped by the errors of calls to a plugin whose process
// has exited (crashed, killed, or stopped by Host.Close).
var ErrPluginDied = errors.New("plugin process died")

// FilePrefix starts the file name of every plugin binary.
const FilePrefix = "gompi-plugin-"

// Handshake is what host and plugin must agree on; a binary run by hand
// without it says it is a plugin and exits.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "GOMPI_PLUGIN_COOKIE",
	MagicCookieValue: "gompi.mca.plugin.v1:6f1d2c9a4e",
}

// pluginKey is the one go-plugin plugin a binary serves; it carries the
// Plugin service (and the host serves Callbacks through its broker).
const pluginKey = "gompi"

// bridge is the go-plugin GRPCPlugin. On the plugin side srv is set; on the
// host it is nil and GRPCClient makes the clients.
type bridge struct {
	goplugin.NetRPCUnsupportedPlugin
	srv *server
}

func (b *bridge) GRPCServer(broker *goplugin.GRPCBroker, s *grpc.Server) error {
	b.srv.broker = broker
	pb.RegisterPluginServer(s, pluginServer{server: b.srv})
	return nil
}

func (b *bridge) GRPCClient(done context.Context, broker *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	cb := &hostCallbacks{id: broker.NextId()}
	// Owned by the plugin's process: it serves the host objects lent to
	// the plugin's modules until go-plugin closes the broker, when the
	// plugin exits or is killed.
	go serveCallbacks(broker, cb)
	return &clients{
		done:      done,
		plugin:    pb.NewPluginClient(c),
		callbacks: cb,
	}, nil
}

// clients are the host's stubs of one plugin process.
type clients struct {
	// done is cancelled by go-plugin once the plugin process has exited.
	done   context.Context
	plugin pb.PluginClient
	// callbacks are the host's objects lent to the plugin's modules.
	callbacks *hostCallbacks
}

var _ goplugin.GRPCPlugin = (*bridge)(nil)
