package slurm

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotAllocation is returned by ReadAllocation outside a Slurm allocation
// (SLURM_JOB_ID unset).
var ErrNotAllocation = errors.New("slurm: not inside a Slurm allocation (SLURM_JOB_ID is not set)")

// maxSlots bounds one node's slots, as rte/hostfile does.
const maxSlots = 1 << 20

// Environment variables read; the first set of each pair wins.
var (
	envNodeList = []string{"SLURM_JOB_NODELIST", "SLURM_NODELIST"}
	envSlots    = []string{"SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE"}
	// salloc and sbatch read --no-kill from these too, and the programs
	// of the allocation inherit them: the only trace of -k a job can see
	// in Slurm 22.05 (neither the allocation's environment nor
	// `scontrol show job` nor `squeue --json` says whether -k was given).
	envNoKill = []string{"SALLOC_NO_KILL", "SBATCH_NO_KILL"}
)

// Allocation is the part of a Slurm allocation gompirun runs in.
type Allocation struct {
	JobID string
	// Nodes in Slurm's order, each with the tasks Slurm gave it as slots.
	Nodes []Node
	// NodeList is the node list as Slurm wrote it; SlotsVar names the
	// variable the slots came from and SlotsList is its value.
	NodeList, SlotsVar, SlotsList string
	// NoKill says the environment shows the allocation was made with
	// --no-kill (SALLOC_NO_KILL or SBATCH_NO_KILL set, and not to "off":
	// salloc and sbatch take "set" and "off" and refuse other values).
	// False means unknown, not "without".
	NoKill bool
}

// TotalSlots is the sum of the nodes' slots.
func (a Allocation) TotalSlots() int {
	n := 0
	for _, nd := range a.Nodes {
		n += nd.Slots
	}
	return n
}

// InAllocation reports whether getenv shows a Slurm allocation.
func InAllocation(getenv func(string) string) bool { return getenv("SLURM_JOB_ID") != "" }

// ReadAllocation reads the allocation from getenv (os.Getenv). Outside an
// allocation it returns ErrNotAllocation; a malformed or inconsistent one
// gives an error wrapping ErrSyntax or ErrTooMany that names the variable.
func ReadAllocation(getenv func(string) string) (Allocation, error) {
	a := Allocation{JobID: getenv("SLURM_JOB_ID")}
	if a.JobID == "" {
		return Allocation{}, ErrNotAllocation
	}
	nlVar, nl := first(getenv, envNodeList)
	slVar, sl := first(getenv, envSlots)
	if nl == "" || sl == "" {
		return Allocation{}, fmt.Errorf("%w: Slurm job %s: %s and %s must both be set (is this an allocation made by salloc or sbatch?)",
			ErrSyntax, a.JobID, envNodeList[0], envSlots[0])
	}
	a.NodeList, a.SlotsVar, a.SlotsList = nl, slVar, sl
	names, err := ParseNodeList(nl)
	if err != nil {
		return Allocation{}, fmt.Errorf("Slurm job %s: %s=%s: %w", a.JobID, nlVar, abbrev(nl), err)
	}
	slots, err := ParseTasksPerNode(sl)
	if err != nil {
		return Allocation{}, fmt.Errorf("Slurm job %s: %s=%s: %w", a.JobID, slVar, abbrev(sl), err)
	}
	if len(slots) != len(names) {
		return Allocation{}, fmt.Errorf("%w: Slurm job %s: %s=%s names %d nodes but %s=%s gives %d counts",
			ErrSyntax, a.JobID, nlVar, abbrev(nl), len(names), slVar, abbrev(sl), len(slots))
	}
	seen := make(map[string]bool, len(names))
	for i, name := range names {
		if seen[name] {
			return Allocation{}, fmt.Errorf("%w: Slurm job %s: %s=%s names %s twice", ErrSyntax, a.JobID, nlVar, abbrev(nl), name)
		}
		seen[name] = true
		a.Nodes = append(a.Nodes, Node{Name: name, Slots: min(slots[i], maxSlots)})
	}
	_, nk := first(getenv, envNoKill)
	a.NoKill = nk != "" && !strings.EqualFold(nk, "off")
	return a, nil
}

// NoKillWarning says what happens to a fault-tolerant job in an allocation
// not known to be made with --no-kill, or "" when it is known.
func (a Allocation) NoKillWarning() string {
	if a.NoKill {
		return ""
	}
	return fmt.Sprintf("cannot tell whether Slurm job %s was allocated with --no-kill (-k): Slurm does not show it to the job. "+
		"Without it, Slurm ends the whole allocation, gompirun included, when one of its nodes fails, and no recovery is possible. "+
		"Allocate with salloc -k or sbatch -k (or export %s=set or %s=set before salloc/sbatch, which also tells gompirun)",
		a.JobID, envNoKill[0], envNoKill[1])
}

// Node is one node of an allocation and its slots.
type Node struct {
	Name  string
	Slots int
}

func first(getenv func(string) string, names []string) (string, string) {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return n, v
		}
	}
	return names[0], ""
}
