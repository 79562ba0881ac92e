package errmgr

import (
	"fmt"

	"gompi/mca"
)

// Replication (the replica component, FTHP-MPI's N+M): a job of N logical
// ranks runs N+M processes, M of the ranks twice. Below the logical rank
// every process has a physical index, which is its rank for the runtime
// (gompirun, gompid, the modex, waitpid, faults): index k < N is the first
// copy of rank k, index N+i the second copy of rank i (i < M). Which copy
// is a rank's primary changes when a primary dies (its replica is promoted
// in place), but the index of a process never does.
//
// The parameters are the replica component's (it registers them, and the
// job's settings carry them); gompirun reads them to launch and place the
// copies (LayoutFor), and tells each rank the layout it launched.
const (
	// ParamReplicaDegree is how many copies a replicated rank has: 1 (no
	// replication, the default) or 2.
	ParamReplicaDegree = "errmgr_replica_degree"
	// ParamReplicaRanks is how many ranks are replicated with degree 2
	// (the first M ranks); 0 replicates every rank.
	ParamReplicaRanks = "errmgr_replica_ranks"
	// ParamReplicaLogLimit bounds the bytes of a process's sender-side
	// message log; a send that would exceed it waits for the receivers'
	// acknowledgements.
	ParamReplicaLogLimit = "errmgr_replica_log_limit"
)

// Layout is where the copies of a replicated job are: N logical ranks,
// the first M of them with a second copy.
type Layout struct {
	N, M int
}

// Procs is the number of processes the job runs.
func (l Layout) Procs() int { return l.N + l.M }

// Replicated reports whether any rank has a second copy.
func (l Layout) Replicated() bool { return l.M > 0 }

// Rank returns the logical rank of process phys and which of its copies
// it was launched as (0 first, 1 second).
func (l Layout) Rank(phys int) (rank, copy int) {
	if phys < l.N {
		return phys, 0
	}
	return phys - l.N, 1
}

// Proc returns the index of copy (0 or 1) of rank, -1 when the rank has
// no such copy.
func (l Layout) Proc(rank, copy int) int {
	switch {
	case rank < 0 || rank >= l.N:
		return -1
	case copy == 0:
		return rank
	case copy == 1 && rank < l.M:
		return l.N + rank
	}
	return -1
}

// Check reports whether the layout is one a job can run.
func (l Layout) Check() error {
	if l.N < 1 || l.M < 0 || l.M > l.N {
		return fmt.Errorf("errmgr: replication of %d of %d ranks: want 0 to %d", l.M, l.N, max(l.N, 0))
	}
	return nil
}

// LayoutFor is the layout of a job of np logical ranks under the job's
// parameters: np processes when replication is off.
func LayoutFor(vals *mca.Values, np int) (Layout, error) {
	if vals == nil || !vals.Has(ParamReplicaDegree) {
		return Layout{N: np}, nil
	}
	switch d := vals.Int(ParamReplicaDegree); d {
	case 1:
		return Layout{N: np}, nil
	case 2:
	default:
		return Layout{}, fmt.Errorf("%s = %d: gompi runs 1 (no replication) or 2 copies of a rank", ParamReplicaDegree, d)
	}
	m := vals.Int(ParamReplicaRanks)
	switch {
	case m == 0:
		m = np
	case m < 0 || m > np:
		return Layout{}, fmt.Errorf("%s = %d with -np %d: want 1 to %d replicated ranks, or 0 for all of them", ParamReplicaRanks, m, np, np)
	}
	l := Layout{N: np, M: m}
	return l, l.Check()
}
