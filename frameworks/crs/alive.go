package crs

import (
	"errors"
	"fmt"
	"syscall"
)

// Alive returns an error wrapping ErrNoProcess when pid names no process
// (a component's Checkpoint says so before anything else).
func Alive(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("%w: %d is not a process id", ErrNoProcess, pid)
	}
	err := syscall.Kill(pid, 0)
	switch {
	case err == nil, errors.Is(err, syscall.EPERM): // EPERM: it exists but belongs to someone else
		return nil
	case errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("%w: pid %d has exited", ErrNoProcess, pid)
	default:
		return fmt.Errorf("probe pid %d: %w", pid, err)
	}
}
