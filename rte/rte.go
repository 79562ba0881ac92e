// Package rte holds what every part of gompi's runtime environment agrees
// on: the environment a rank is started with, where each process keeps its
// sockets and node-local files, and the record a running gompirun leaves
// for tools. The parts themselves are in the subpackages: hnp (gompirun),
// daemon (gompid), rankinit (the init a rank runs under when its job's CRS
// is criu), rankclient (a rank's side), control (the authenticated control
// plane), routed (the shape of the daemon tree and its routes), hostfile
// and mapping (where ranks go), and jobs (finding running jobs). Starting children that never outlive their parent is the
// launch framework's base, frameworks/plm/proc.
package rte

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The environment of a rank started by gompid.
const (
	EnvRank    = "GOMPI_RANK"          // world rank
	EnvSize    = "GOMPI_SIZE"          // number of ranks
	EnvJob     = "GOMPI_JOB"           // job id
	EnvNode    = "GOMPI_NODE"          // node name
	EnvNodeDir = "GOMPI_NODE_DIR"      // the node-local directory of the job
	EnvDaemon  = "GOMPI_DAEMON_SOCKET" // the node daemon's Unix socket
	// EnvSecretFD names the descriptor a rank reads its secrets from
	// (control.RankSecrets: the job's control secret and its launch
	// generation's data-plane secret, in hex, then end of file): a pipe
	// its daemon filled, so they are never in the rank's environment,
	// which stays readable in /proc/PID/environ and in any image of the
	// process. rankclient reads it, closes it and removes the variable.
	EnvSecretFD = "GOMPI_JOB_SECRET_FD"
	// EnvLifelineFDs names the descriptors of a rank's lifeline (package
	// rte/lifeline) as "R,W": the pipe it reads gompid's word from and the
	// one it writes its own on. gompid gives them to the ranks of a job
	// whose CRS saves them from outside (criu); rankclient takes them,
	// marks them close-on-exec and removes the variable.
	EnvLifelineFDs = "GOMPI_LIFELINE_FDS"
)

// SecretFD is the descriptor a daemon hands the secret pipe on (the first
// after standard error).
const SecretFD = 3

// The environment of a rank restarted from a snapshot (gompi-restart); the
// rank client reads it into its snapc.RestartInfo and removes it.
const (
	EnvRestartRef = "GOMPI_RESTART_REF" // path of the global snapshot reference
	EnvRestartSeq = "GOMPI_RESTART_SEQ" // the sequence restarted from
	EnvRestartDir = "GOMPI_RESTART_DIR" // this rank's local snapshot, readable on its node
	// EnvRestartMigrate is set (to 1) for a rank a migration started on a
	// new node while the job runs: its modex is a rejoin.
	EnvRestartMigrate = "GOMPI_RESTART_MIGRATE"
	// EnvRestartFence is set for a rank an in-job rollback started anew
	// while the survivors wait: the last fence the job completed. Its
	// modex is the next fence, which the survivors join as they restore.
	EnvRestartFence = "GOMPI_RESTART_FENCE"
	// EnvRestartEpoch goes with EnvRestartFence: the rollback's epoch, to
	// which the rank's connections belong (mpi.RollbackEpocher).
	EnvRestartEpoch = "GOMPI_RESTART_EPOCH"
)

// JobEnv lists the variables above; a daemon removes inherited copies
// before setting a rank's own.
var JobEnv = []string{EnvRank, EnvSize, EnvJob, EnvNode, EnvNodeDir, EnvDaemon, EnvSecretFD, EnvLifelineFDs, EnvRestartRef, EnvRestartSeq, EnvRestartDir, EnvRestartMigrate, EnvRestartFence, EnvRestartEpoch}

// RuntimeDir is where this user's gompirun processes keep their control
// sockets: ${XDG_RUNTIME_DIR:-/tmp}/gompi-<uid>.
func RuntimeDir() string {
	base := os.Getenv("XDG_RUNTIME_DIR")
	if base == "" {
		base = "/tmp"
	}
	return filepath.Join(base, fmt.Sprintf("gompi-%d", os.Getuid()))
}

// HNPDir is the private directory of the gompirun with this pid: its
// control socket, job record and secret.
func HNPDir(pid int) string { return filepath.Join(RuntimeDir(), fmt.Sprintf("hnp-%d", pid)) }

// Names of the files in an HNPDir.
const (
	ControlSocket = "control.sock"
	JobRecordFile = "job.json"
	SecretFile    = "secret"
	DaemonSocket  = "daemon.sock" // in a node directory
	// TreeSocket is where a daemon on this machine serves its children in
	// the daemon tree (package rte/routed), in its node directory.
	TreeSocket = "tree.sock"
)

// SessionBase is the folder holding node-local directories: the value of
// plm_base_session_dir, else $TMPDIR/gompi-<uid>.
func SessionBase(setting string) string {
	if setting != "" {
		return setting
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("gompi-%d", os.Getuid()))
}

// NodeDir is a node's directory for one job: <base>/<job>/<node>.
func NodeDir(base, job, node string) string { return filepath.Join(base, job, node) }

// ValidJobID reports whether id can name a job (it names directories).
func ValidJobID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	return strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}
