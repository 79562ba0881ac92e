package stage

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ParamHoldFetch is a test hook (builds with -tags gompitest only):
// NODE:RANK:FIFO makes NODE's daemon, about to fetch RANK's snapshot for a
// restart, read the named pipe FIFO to its end first. The test sees the
// daemon arrive (its own open of the pipe for writing returns), does what
// it must while the restart is held there (kill the daemon), and releases
// it by closing the pipe; once the test removes FIFO, fetches go on
// unheld, so the daemons of later recoveries pass.
const ParamHoldFetch = prefix + "test_hold_fetch"

// fetchHold is a parsed ParamHoldFetch.
type fetchHold struct {
	node string
	rank int
	fifo string
}

func parseHoldFetch(s string) (*fetchHold, error) {
	node, rest, ok1 := strings.Cut(s, ":")
	r, fifo, ok2 := strings.Cut(rest, ":")
	rank, err := strconv.Atoi(r)
	if !ok1 || !ok2 || node == "" || fifo == "" || err != nil || rank < 0 {
		return nil, fmt.Errorf("sstore/stage: %s = %q: want NODE:RANK:FIFO", ParamHoldFetch, s)
	}
	return &fetchHold{node: node, rank: rank, fifo: fifo}, nil
}

// wait holds a fetch of rank on node while the hook asks for it.
func (h *fetchHold) wait(node string, rank int) {
	if h == nil || node != h.node || rank != h.rank {
		return
	}
	f, err := os.Open(h.fifo) // blocks until the test opens it for writing
	if err != nil {
		return // removed: the hold is over
	}
	defer f.Close()
	io.Copy(io.Discard, f)
}
