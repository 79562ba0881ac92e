// Package mca is gompi's Modular Component Architecture: typed run-time
// parameters with their sources and precedence, the per-framework component
// registries, and component selection.
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
package mca
