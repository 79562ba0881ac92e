package rollback

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"gompi/frameworks/errmgr"
)

// errFallBack is wrapped by every reason a fault cannot be rolled back in
// place: the fault passes on to the next policy (autor's full restart).
var errFallBack = errors.New("no in-place rollback")

// decide plans the rollback of the ranks lost (and of the nodes gone) in a
// job of size ranks as v describes it, or says why it cannot: the reason
// wraps errFallBack. It is the whole policy, with no side effect, so that
// every rule is tested in a table.
//
// The rules: only crs=self survivors can restore in place; a rollback
// under way is not joined (a second failure during one falls back to a
// full restart, which restarts every rank whatever state the first left);
// a lost rank starts again on its own node when that node's daemon runs
// (its gompid), else on the up node running the fewest ranks; the
// sequence is the newest committed one that every node taking part (the
// survivors' and the lost ranks' new ones) reaches, in its node cache or
// in global storage.
func decide(size int, lost []int, lostNodes []string, v errmgr.RollbackView) (errmgr.Rollback, error) {
	lost = slices.Sorted(slices.Values(lost))
	lost = slices.Compact(lost)
	switch {
	case v.CRS != "self":
		return errmgr.Rollback{}, fmt.Errorf("%w: crs %s saves whole processes: survivors are not restored in place (only crs self)", errFallBack, v.CRS)
	case v.Rolling:
		return errmgr.Rollback{}, fmt.Errorf("%w: a failure during a rollback under way", errFallBack)
	case len(lost) == 0:
		return errmgr.Rollback{}, fmt.Errorf("%w: no rank was lost", errFallBack)
	case len(lost) >= size:
		return errmgr.Rollback{}, fmt.Errorf("%w: every rank was lost", errFallBack)
	case len(v.Global) == 0 && len(v.Cached) == 0:
		return errmgr.Rollback{}, fmt.Errorf("%w: no committed sequence to return to", errFallBack)
	}
	place, err := placeLost(lost, lostNodes, v.Nodes)
	if err != nil {
		return errmgr.Rollback{}, err
	}
	seq, err := chooseSeq(lost, place, v)
	if err != nil {
		return errmgr.Rollback{}, err
	}
	return errmgr.Rollback{Seq: seq, Lost: lost, Place: place, LostNodes: slices.Clone(lostNodes)}, nil
}

// placeLost gives each lost rank a node: its own when up, else the up node
// with the fewest ranks (ties to the first in the job's order).
func placeLost(lost []int, lostNodes []string, nodes []errmgr.NodeInfo) (map[int]string, error) {
	up := map[string]bool{}
	load := map[string]int{}
	home := map[int]string{}
	isLost := map[int]bool{}
	for _, r := range lost {
		isLost[r] = true
	}
	for _, n := range nodes {
		up[n.Name] = n.Up && !slices.Contains(lostNodes, n.Name)
		for _, r := range n.Ranks {
			home[r] = n.Name
			if !isLost[r] {
				load[n.Name]++
			}
		}
	}
	place := map[int]string{}
	for _, r := range lost {
		if h := home[r]; up[h] {
			place[r] = h
			load[h]++
			continue
		}
		best := ""
		for _, n := range nodes {
			if up[n.Name] && (best == "" || load[n.Name] < load[best]) {
				best = n.Name
			}
		}
		if best == "" {
			return nil, fmt.Errorf("%w: no node is up to start rank %d on", errFallBack, r)
		}
		place[r] = best
		load[best]++
	}
	return place, nil
}

// chooseSeq is the newest committed sequence every node taking part
// reaches: the survivors' nodes and the lost ranks' new ones.
func chooseSeq(lost []int, place map[int]string, v errmgr.RollbackView) (int, error) {
	involved := map[string]bool{}
	for _, n := range v.Nodes {
		for _, r := range n.Ranks {
			if !slices.Contains(lost, r) {
				involved[n.Name] = true
			}
		}
	}
	for _, n := range place {
		involved[n] = true
	}
	cands := slices.Clone(v.Global)
	for _, c := range v.Cached {
		cands = append(cands, c...)
	}
	slices.Sort(cands)
	cands = slices.Compact(cands)
	for i := len(cands) - 1; i >= 0; i-- {
		s := cands[i]
		if slices.Contains(v.Global, s) || everyNodeCaches(s, involved, v.Cached) {
			return s, nil
		}
	}
	return 0, fmt.Errorf("%w: no committed sequence is reachable from every node of the job (%v)", errFallBack, slices.Sorted(maps.Keys(involved)))
}

func everyNodeCaches(seq int, nodes map[string]bool, cached map[string][]int) bool {
	for n := range nodes {
		if !slices.Contains(cached[n], seq) {
			return false
		}
	}
	return true
}
