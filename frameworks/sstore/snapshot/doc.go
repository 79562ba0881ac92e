// Package snapshot is the on-disk format of a global snapshot reference,
// the one thing every process of a checkpoint agrees on: a rank writes its
// local snapshot in it, the SStore modules move it, the global coordinator
// commits sequences in it and gompi-restart reads it back.
//
// It holds the layout of a reference (Ref, RefName, LocalName; FindRef
// looks a bare name up in the current folder, the global snapshot
// directory, then the user's index of remote references), the node-local layout of staged copies the stage component
// keeps and gompi-restart -i reads (stage.go), its two metadata files
// (GlobalMeta in global_snapshot_meta, LocalMeta in each rank's
// snapshot_meta) with their text encoding, read with every count checked
// against the file's content and the file's size bounded (MaxMetaSize),
// each sequence's rank count and a repartition's origin (seqranks.go: a
// job restarted on another rank count goes on in its reference),
// the job's launch as a crs.Launch (launch.go), how a snapshot file is
// written durably with its CRC-32C (CreateFile, FileWriter,
// WriteFileAtomic) and read back only as a regular file inside the
// reference (OpenFile), the owner-only access of a reference and the
// check gompi-restart makes of it (perm.go), how a restart point is chosen
// and verified (ChooseSeq, RestartPoint: sizes and checksums, or sizes
// alone for gompi-restart -i), which sequences retention removes and
// which removed sequences' folders it keeps because newer ones store
// blocks in them (retain.go), MetaStore, which reads and writes the
// metadata of a reference wherever it lives (this node, or a remote host
// through FileM), and the per-user index of remote references with the
// FileM settings that reach them, never credentials (index.go).
//
// It knows nothing of the SStore framework's modules: package sstore (the
// framework's interface) imports it, never the reverse. Its errors keep
// the "sstore:" prefix users have always seen, since the format is the
// SStore framework's.
package snapshot
