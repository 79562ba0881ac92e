// Package mca is gompi's Modular Component Architecture: typed run-time
// parameters with their sources and precedence, the per-framework component
// registries, component selection, and the life of a selected module.
//
// Everything gompi does is chosen at run time through parameters named
// framework_component_param (sstore_stage_compress) plus one selector per
// framework (crs = self). A process registers every parameter it knows,
// gathers the sources (command line, environment, AMCA sets, the user's and
// the system's parameter files, defaults) with LoadSources, and resolves
// them once with Params.Resolve. The resulting Values are immutable, know
// where each value came from, and travel with a job.
//
// Components are registered explicitly, never from init(): a framework's
// registry panics on a duplicate name, lists names sorted, and selects
// modules by priority honouring include (a,b) and exclude (^a,b) lists.
//
// # The life of a module
//
// Every component of every framework lives the same life, in three steps;
// only the first is required, the others are optional interfaces a module
// implements when it needs them (Caddy v2's modules are the model):
//
//  1. Query (Component.Query): the component looks at the resolved
//     parameters and the process's Role and answers with a module and its
//     priority, or an error wrapping ErrSkip when it does not apply here
//     (a failure is any other error). Selection (Framework.Select) keeps
//     the best answer, or every answer of a stacked framework (btl,
//     errmgr). A module must not start goroutines, open connections or
//     touch the host's state in Query: gompi-info queries every component
//     without using any.
//  2. Provision (Provisioner[H]): the module is given its host, the part of
//     the process it works for, whose type H each framework defines as
//     <framework>.Host: sstore's is the node, its FileM and where progress
//     goes; errmgr's is the job it watches; crs's is the rank whose state
//     it saves (self) or the daemon that restores ranks (a transparent
//     CRS: descriptors in, restored processes out). Provision comes after
//     selection and before any other method; the role's assembly (package
//     boot, assemble.go) calls it, except where the host exists only later
//     (errmgr: each run of the job; crs in a rank: package cr, once the
//     program asks for checkpoints), which the framework's Host doc says.
//     A module that needs no host does not implement it.
//  3. Close (io.Closer): a module that holds resources (connections,
//     goroutines, plugin clients) releases them. Every module a process
//     selected is closed by the one Close of its role's module set, when
//     the process ends its work, whether or not it was provisioned.
//
// Snapshot coordination (snapc) adds a level of its own on top: a selected
// coordinating module starts the job's global coordinator in gompirun
// (once per run) and a node's local coordinator in gompid (once per launch)
// with snapc.Coordinator's NewGlobal and NewLocal; those coordinators are
// the runs' state, not modules, and are ended by their own Close.
//
// # Where modules run, and which can be plugins
//
// A module runs in the process that selected it. The frameworks whose
// modules run in gompirun or gompid (crs, filem, sstore, snapc, errmgr,
// plm) can be carried by out-of-process plugins (package mca/plugin,
// hashicorp/go-plugin over gRPC), all through one generic call: no
// checkpoint bytes cross the bridge, only paths, PIDs, options and, for a
// host, what the framework's Host says may cross (host objects lent back
// over the bridge; descriptors by SCM_RIGHTS; restored processes held by
// the plugin that restored them). snapc's coordinators are per-run objects
// the plugin holds, in conversation with the job through lent ports. The
// frameworks whose modules run inside a rank (btl, crcp, inc) stay in
// process for good: they sit on every message's path or on the rank's own
// memory, where a remote call per operation is not an option.
package mca
