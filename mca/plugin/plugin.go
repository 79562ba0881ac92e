// Package plugin is the bridge to out-of-process components: plugin
// binaries, started with hashicorp/go-plugin and spoken to over gRPC, whose
// components join a process's frameworks beside the built-in ones and are
// selected the same way.
//
// The host side is Load: it finds gompi-plugin-* executables on
// mca_base_component_path, checks their pinned checksums, starts them, asks
// each what it carries (Describe) and adds one proxy component per
// described component with Framework.Add. A proxy forwards Query with all
// the host's resolved settings, and each module call with its paths, PIDs
// and options; no file contents or snapshot bytes cross the bridge.
// Component errors come back with their text and with the sentinel errors
// of the frameworks (crs.ErrNoProcess, filem.ErrUnreachable,
// fs.ErrNotExist, mca.ErrSkip, context errors, ...) and filem.TransferErrors
// intact, so errors.Is and errors.As work as they do in process. Every call
// has a deadline (mca_base_component_plugin_timeout); a plugin that dies
// makes calls fail with ErrPluginDied; neither brings the host down.
//
// The plugin side is Serve, called from a plugin binary's main with the
// components it carries (FileM, CRS). It keeps its own parameter table, so
// the plugin's components resolve their parameters from the host's settings
// with Params.ResolveSettings.
//
// Only the filem and crs frameworks can be carried by plugins for now.
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
// Plugin, FileM and CRS services.
const pluginKey = "gompi"

// bridge is the go-plugin GRPCPlugin. On the plugin side srv is set; on the
// host it is nil and GRPCClient makes the clients.
type bridge struct {
	goplugin.NetRPCUnsupportedPlugin
	srv *server
}

func (b *bridge) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterPluginServer(s, pluginServer{server: b.srv})
	pb.RegisterFileMServer(s, filemServer{server: b.srv})
	pb.RegisterCRSServer(s, crsServer{server: b.srv})
	return nil
}

func (b *bridge) GRPCClient(done context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &clients{
		done:   done,
		plugin: pb.NewPluginClient(c),
		filem:  pb.NewFileMClient(c),
		crs:    pb.NewCRSClient(c),
	}, nil
}

// clients are the host's stubs of one plugin process.
type clients struct {
	// done is cancelled by go-plugin once the plugin process has exited.
	done   context.Context
	plugin pb.PluginClient
	filem  pb.FileMClient
	crs    pb.CRSClient
}

var _ goplugin.GRPCPlugin = (*bridge)(nil)
