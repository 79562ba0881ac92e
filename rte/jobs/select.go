package jobs

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"gompi/cli"
)

// Selector is how a tool names the running job it talks to: the PID of
// its gompirun as the argument, or --hnp-pid, or --hnp-jobid (Open MPI's
// flags).
type Selector struct {
	hnpPID int
	hnpJob string
}

// AddFlags adds --hnp-pid and --hnp-jobid.
func (s *Selector) AddFlags(f *pflag.FlagSet) {
	f.IntVar(&s.hnpPID, "hnp-pid", 0, "PID of the job's gompirun (instead of the argument)")
	f.StringVar(&s.hnpJob, "hnp-jobid", "", "job id of the job (instead of the PID)")
}

// PID returns the gompirun the command line names (args: at most one
// PID), once it is sure it is a running gompirun. Errors about the
// command line are usage errors.
func (s *Selector) PID(args []string) (int, error) {
	pid, given := 0, 0
	if len(args) == 1 {
		p, err := strconv.Atoi(args[0])
		if err != nil || p <= 0 {
			return 0, cli.Usagef("%q is not a process id: give the PID of the job's gompirun (gompi-ps lists them)", args[0])
		}
		pid = p
		given++
	}
	if s.hnpPID != 0 {
		if s.hnpPID < 0 {
			return 0, cli.Usagef("--hnp-pid %d is not a process id", s.hnpPID)
		}
		pid = s.hnpPID
		given++
	}
	if s.hnpJob != "" {
		given++
	}
	switch {
	case given == 0:
		return 0, cli.Usagef("which job? give the PID of its gompirun (gompi-ps lists them)")
	case given > 1:
		return 0, cli.Usagef("give the job once: a PID, --hnp-pid or --hnp-jobid")
	}
	if s.hnpJob != "" {
		recs, err := List()
		if err != nil {
			return 0, err
		}
		for _, r := range recs {
			if r.Job == s.hnpJob {
				pid = r.PID
			}
		}
		if pid == 0 {
			return 0, fmt.Errorf("job %s: %w (gompi-ps lists the running jobs)", s.hnpJob, ErrNoJob)
		}
	}
	return pid, nil
}

// FindHNP makes sure pid is a running gompirun, and says what it is when
// not.
func FindHNP(pid int) error {
	r, err := Read(pid)
	if err == nil && r.PID == pid && r.Alive() {
		return nil
	}
	if _, serr := os.Stat(fmt.Sprintf("/proc/%d", pid)); serr != nil {
		return fmt.Errorf("no process with pid %d: %w (the job has ended? gompi-ps lists the running jobs)", pid, ErrNoJob)
	}
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	name := strings.TrimSpace(string(comm))
	if name == "" {
		name = "unknown"
	}
	if name == "gompirun" {
		return fmt.Errorf("gompirun %d has no job record yet: %w; it is still starting, try again in a moment", pid, ErrNoJob)
	}
	return fmt.Errorf("process %d (%s) is not a gompirun: %w; give the PID of the job's gompirun (gompi-ps lists them)", pid, name, ErrNoJob)
}
