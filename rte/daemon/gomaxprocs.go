package daemon

import (
	"strconv"
	"strings"
)

// gomaxprocs returns the GOMAXPROCS of a rank on a node of cpus
// processors where ranks of the job run, by plm_base_gomaxprocs (param):
// n > 0 is taken as it is; 0 shares the processors out, at least one per
// rank, as Open MPI binds one rank per core (a Go runtime that believes it
// owns every core runs its reader goroutines and the waiting one on
// threads of their own, which then compete with the other ranks for the
// cores, and wakes them with futexes); < 0 returns 0: set nothing.
func gomaxprocs(param, cpus, ranks int) int {
	switch {
	case param > 0:
		return param
	case param < 0:
		return 0
	}
	return max(1, cpus/max(1, ranks))
}

// withGOMAXPROCS appends the GOMAXPROCS gomaxprocs computes to a rank's
// environment env, unless env sets GOMAXPROCS already (the user's choice
// wins) or there is nothing to set.
func withGOMAXPROCS(env []string, param, cpus, ranks int) []string {
	n := gomaxprocs(param, cpus, ranks)
	if n == 0 {
		return env
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOMAXPROCS=") {
			return env
		}
	}
	return append(env, "GOMAXPROCS="+strconv.Itoa(n))
}
