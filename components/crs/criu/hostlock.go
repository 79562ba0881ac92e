package crscriu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// CRIU runs one at a time on a host. Two dumps at once from two gompids
// of simulated nodes on one machine fail in CRIU's parasite ("Can't
// retrieve FD from socket", "Command 76 for daemon failed"): six of six
// checkpoints of a 4-rank job on two such nodes failed, none of four on
// one node (whose gompid dumps its ranks one after the other). An flock
// on a file every gompid of the host finds serializes them; it is released
// by the kernel if the process dies holding it. Within one process it
// serializes too (each call opens the file anew), which go-criu needs:
// it makes each CRIU's socket pair inheritable outside os/exec's fork
// lock, so CRIUs started at once by one process would hold each other's
// sockets.

// hostLockFile is the lock's file: in the system's temporary folder, the
// same for every process of the host (crs criu runs as root).
func hostLockFile() string { return filepath.Join(os.TempDir(), "gompi-criu.lock") }

// hostLock waits for this host's CRIU lock, or for ctx to end, and
// returns its release.
func hostLock(ctx context.Context) (func(), error) {
	f, err := os.OpenFile(hostLockFile(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the host's CRIU lock: %w", err)
	}
	got := make(chan error, 1)
	// The goroutine is this call's and ends when flock returns; a wait
	// given up leaves it a second one that closes the file (releasing the
	// lock) as soon as it is taken.
	go func() { got <- unix.Flock(int(f.Fd()), unix.LOCK_EX) }()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("the host's CRIU lock %s: %w", f.Name(), err)
		}
		return func() { f.Close() }, nil
	case <-ctx.Done():
		go func() {
			<-got
			f.Close()
		}()
		return nil, fmt.Errorf("waiting for the host's CRIU lock %s (another CRIU run on this host): %w", f.Name(), ctx.Err())
	}
}
