package errmgr

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Prediction is what a Predicted fault announces: ranks, and nodes whose
// every rank, expected to fail, by when, and where they may go. gompirun
// builds one from gompi-migrate (a person or a fault monitor) and from a
// rank's cr.Migrate.
type Prediction struct {
	Ranks []int    `json:"ranks,omitempty"`
	Nodes []string `json:"nodes,omitempty"`
	// Onto are suggested destinations (gompi-migrate --onto), in order of
	// preference; empty lets the policy choose.
	Onto []string `json:"onto,omitempty"`
	// Deadline is when the fault is expected; zero when unknown.
	Deadline time.Time `json:"deadline,omitempty"`
	// Wishes are the ranks' own destination wishes (cr.Migrate).
	Wishes []MigrateWish `json:"wishes,omitempty"`
}

// MigrateWish is one rank's cr.Migrate: a host to go to, or the node of
// another rank (Near, -1 for none), or only off its current node.
type MigrateWish struct {
	Rank    int    `json:"rank"`
	Host    string `json:"host,omitempty"`
	Near    int    `json:"near"`
	OffNode bool   `json:"off_node,omitempty"`
}

// NodeInfo is one node of the job as a migration policy sees it.
type NodeInfo struct {
	Name  string
	Ranks []int // the ranks it runs, ascending
	Up    bool  // its daemon runs (a lost node takes nothing)
}

// Migration asks the job to move ranks while it runs: Dest[r] is rank r's
// new node, a node of the job that is up.
type Migration struct {
	Dest map[int]string
	// Why is the prediction, for the job's report.
	Why string
}

// MigrationResult is a finished migration.
type MigrationResult struct {
	Seq int // the migration's sequence of the job's reference (not a restart point)
	// Took is from the request to every moved rank running again;
	// Checkpoint and Restart are its two parts.
	Took, Checkpoint, Restart time.Duration
}

// Migrator is implemented by a Runtime that can move ranks while the job
// runs (gompirun with C/R on): only the moving ranks are saved, the others
// wait at their safe point until the moved ones run again.
type Migrator interface {
	// Nodes are the job's nodes, in the order of its hostfile.
	Nodes() []NodeInfo
	// CheckpointTime is how long the newest committed checkpoint of the
	// job took; false when there is none yet.
	CheckpointTime(ctx context.Context) (time.Duration, bool)
	// Migrate moves the ranks and returns once they run on their new
	// nodes. A failure during it ends with an error wrapping
	// ErrMigrationAbandoned: the fault that interrupted it comes next to
	// the stack (autor recovers the job from its last checkpoint). A
	// request that is refused before anything was done (a node not up,
	// no checkpoint possible) leaves the job as it was.
	Migrate(ctx context.Context, m Migration) (MigrationResult, error)
}

// ErrMigrationAbandoned: a failure happened during a migration; the job
// was left for the next policy of the stack to recover.
var ErrMigrationAbandoned = errors.New("migration abandoned after a failure during it")

// describe names what a prediction is about ("ranks 2, 5 and node n2"),
// and whether that is more than one.
func (p *Prediction) describe() (string, bool) {
	var parts []string
	ranks := p.Ranks
	for _, w := range p.Wishes {
		if !slices.Contains(ranks, w.Rank) {
			ranks = append(ranks, w.Rank)
		}
	}
	if len(ranks) > 0 {
		s := make([]string, len(ranks))
		for i, r := range ranks {
			s[i] = strconv.Itoa(r)
		}
		word := "rank "
		if len(ranks) > 1 {
			word = "ranks "
		}
		parts = append(parts, word+strings.Join(s, ", "))
	}
	if len(p.Nodes) > 0 {
		word := "node "
		if len(p.Nodes) > 1 {
			word = "nodes "
		}
		parts = append(parts, word+strings.Join(p.Nodes, ", "))
	}
	if len(parts) == 0 {
		return "nothing", false
	}
	return strings.Join(parts, " and "), len(ranks)+len(p.Nodes) > 1
}
