// Package jobs finds the running gompirun processes of this user: each
// keeps a private directory named after its PID (rte.HNPDir) holding its
// control socket, its job secret and a job record (job.json). Tools list
// the records, drop those of dead processes, and dial a job's HNP by PID.
package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	"gompi/rte"
	"gompi/rte/control"
)

// ErrNoJob is wrapped when no running job has the PID asked for.
var ErrNoJob = errors.New("no running gompi job")

// Record describes a running job; gompirun writes it when the job starts.
type Record struct {
	Job     string    `json:"job"`
	PID     int       `json:"pid"`
	NP      int       `json:"np"`
	Nodes   []string  `json:"nodes"`
	PLM     string    `json:"plm"`
	Start   time.Time `json:"start"`
	Command []string  `json:"command"`
	// ProcStart is the HNP's start time in clock ticks since boot
	// (/proc/<pid>/stat field 22), so a record is not mistaken for a job
	// when its PID has been reused.
	ProcStart uint64 `json:"proc_start"`
}

// Write stores r in dir as job.json, atomically and readable by the owner only.
func Write(dir string, r Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	tmp := filepath.Join(dir, rte.JobRecordFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, rte.JobRecordFile)); err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	return nil
}

// WriteSecret stores the job secret in dir, readable by the owner only.
func WriteSecret(dir string, s control.Secret) error {
	if err := os.WriteFile(filepath.Join(dir, rte.SecretFile), []byte(s.Hex()+"\n"), 0o600); err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	return nil
}

// Read loads the record of the HNP with this pid.
func Read(pid int) (Record, error) {
	var r Record
	b, err := os.ReadFile(filepath.Join(rte.HNPDir(pid), rte.JobRecordFile))
	if errors.Is(err, os.ErrNotExist) {
		return r, fmt.Errorf("jobs: pid %d: %w (gompi-ps lists the running jobs)", pid, ErrNoJob)
	}
	if err != nil {
		return r, fmt.Errorf("jobs: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("jobs: %s: %w", filepath.Join(rte.HNPDir(pid), rte.JobRecordFile), err)
	}
	return r, nil
}

// Alive reports whether the process the record names is still the job's HNP.
func (r Record) Alive() bool {
	st, err := ProcStart(r.PID)
	return err == nil && (r.ProcStart == 0 || st == r.ProcStart)
}

// List returns the records of this user's running jobs, oldest first. The
// directories of jobs whose gompirun is gone (killed outright) are removed.
func List() ([]Record, error) {
	ents, err := os.ReadDir(rte.RuntimeDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	var out []Record
	for _, e := range ents {
		pid, ok := strings.CutPrefix(e.Name(), "hnp-")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil || !e.IsDir() {
			continue
		}
		r, err := Read(n)
		if err != nil && !errors.Is(err, ErrNoJob) {
			return nil, err
		}
		if err == nil && r.PID == n && r.Alive() {
			out = append(out, r)
			continue
		}
		dir := rte.HNPDir(n)
		st, serr := ProcStart(n)
		if errors.Is(err, ErrNoJob) && serr == nil && (r.ProcStart == 0 || st == r.ProcStart) {
			continue // a gompirun that is starting and has not written its record yet
		}
		_ = os.RemoveAll(dir)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out, nil
}

// Dial connects to the HNP with this pid, authenticating with the job
// secret it left in its directory.
func Dial(pid int) (*grpc.ClientConn, error) {
	dir := rte.HNPDir(pid)
	b, err := os.ReadFile(filepath.Join(dir, rte.SecretFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("jobs: pid %d: %w (gompi-ps lists the running jobs)", pid, ErrNoJob)
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	s, err := control.ParseSecret(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("jobs: %s: %w", filepath.Join(dir, rte.SecretFile), err)
	}
	return control.DialUnix(filepath.Join(dir, rte.ControlSocket), s)
}

// ProcStart returns the start time of process pid in clock ticks since
// boot, from /proc/<pid>/stat.
func ProcStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("jobs: %w", err)
	}
	return ParseProcStart(string(b))
}

// ParseProcStart reads field 22 (starttime) of a /proc/<pid>/stat line.
// The second field is the command name in parentheses and may itself hold
// spaces and parentheses, so fields are counted after the last ')'.
func ParseProcStart(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("jobs: malformed /proc stat line: no ')'")
	}
	fields := strings.Fields(stat[i+1:])
	// fields[0] is field 3 (state); starttime is field 22.
	if len(fields) < 20 {
		return 0, fmt.Errorf("jobs: malformed /proc stat line: %d fields after the command", len(fields))
	}
	v, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("jobs: malformed /proc stat starttime %q", fields[19])
	}
	return v, nil
}
