package btl

import (
	"context"
	"log/slog"
	"sync"
)

// maxRefusalPeers bounds the peers a Refusals remembers; past it every
// refusal is logged at debug level.
const maxRefusalPeers = 256

// Refusals logs the connections a rank refuses (a peer of another user, a
// hello without the job's secret): the first refusal of each peer at
// warning level, later ones at debug level, so a peer that keeps trying
// cannot flood the job's log. The zero value is ready to use.
type Refusals struct {
	mu   sync.Mutex
	seen map[string]bool
}

// Log records that a connection from peer (an address, a user) was
// refused for err.
func (r *Refusals) Log(log *slog.Logger, peer string, err error) {
	r.mu.Lock()
	first := !r.seen[peer] && len(r.seen) < maxRefusalPeers
	if first {
		if r.seen == nil {
			r.seen = map[string]bool{}
		}
		r.seen[peer] = true
	}
	r.mu.Unlock()
	level := slog.LevelWarn
	if !first {
		level = slog.LevelDebug
	}
	log.Log(context.Background(), level, "refused a connection", "peer", peer, "err", err)
}
