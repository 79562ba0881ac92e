package cr

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"gompi/frameworks/crs"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/snapc"
	"gompi/mpi"
)

// ErrMigrated is returned by SafePoint (and the calls that count as safe
// points) in a rank that a migration moved, when the leave function given
// with WithLeave returned: the rank runs on in its new process, started
// elsewhere from the snapshot it just took. By default the process exits
// instead.
var ErrMigrated = errors.New("cr: this rank moved to another node (migration); its process ends here")

// A migration, as a rank lives it (the job's coordinators drive it; see
// snapc.Request.Ranks): at the target safe point every rank drains its
// channels, the moving ranks save themselves, and every rank then waits
// for the release. A moving rank ends there; its new process restarts
// from the snapshot on another node and rejoins the job. The others
// resume once the moved ranks run again, reaching them at their new
// endpoints. A cancelled migration resumes every rank where it was.

// awaitRelease registers the wait for request id's release; handle
// delivers it.
func (c *Coordinator) awaitRelease(id uint64) chan snapc.AppRequest {
	ch := make(chan snapc.AppRequest, 1)
	c.mu.Lock()
	c.releaseID, c.release = id, ch
	c.mu.Unlock()
	return ch
}

func (c *Coordinator) onRelease(r snapc.AppRequest) {
	c.mu.Lock()
	ch := c.release
	if ch == nil || c.releaseID != r.ID {
		c.mu.Unlock()
		c.log.Debug("release of a migration this rank does not wait for", "request", r.ID)
		return
	}
	c.release = nil
	c.mu.Unlock()
	ch <- r
}

// migrationEnd waits at safe point n for the migration's release and
// resumes, or ends the rank when it moves. release is nil when this rank
// could not take part (serr says why).
func (c *Coordinator) migrationEnd(ctx context.Context, req snapc.AppRequest, n uint64, serr error, allOK bool, release chan snapc.AppRequest) error {
	var rel *snapc.AppRequest
	if serr == nil && allOK && release != nil {
		select {
		case r := <-release:
			rel = &r
		case <-ctx.Done():
			// Cancelled by the coordinator: the migration was abandoned
			// before its commit.
		case <-c.p.Done():
			return fmt.Errorf("cr: migration at safe point %d: %w", n, mpi.ErrStopped)
		}
	}
	c.mu.Lock()
	c.release = nil
	c.mu.Unlock()
	state := crs.StateContinue
	switch {
	case serr != nil:
		state = crs.StateError
		c.p.PeersStayed(req.Migrate)
	case rel != nil && rel.Leave:
		state = crs.StateTerm
	case rel != nil:
		if err := c.p.PeersMoved(rel.Peers); err != nil {
			c.log.Error("migration: cannot reach a moved rank", "err", err)
		}
	default:
		c.p.PeersStayed(req.Migrate)
	}
	if err := c.stack.Recover(context.WithoutCancel(ctx), state); err != nil {
		c.log.Warn("migration: recovering the INC stack", "state", state, "err", err)
	}
	switch state {
	case crs.StateTerm:
		c.log.Debug("migration: this rank moves; its process ends", "safepoint", n)
		if err := c.cfg.leave(); err != nil {
			return fmt.Errorf("cr: leave for the migration at safe point %d: %w", n, err)
		}
		return ErrMigrated
	case crs.StateContinue:
		c.continued()
	}
	return nil
}

// MigrateOptions qualify a cr.Migrate wish.
type MigrateOptions struct {
	// OffNode: move off the current node (Open MPI's CR_OFF_NODE info
	// key), wherever the job finds room.
	OffNode bool
}

// migrator is the runtime link of a rank that can ask for migrations.
type migrator interface {
	Migrate(ctx context.Context, wishes []errmgr.MigrateWish) error
}

// Migrate asks for every rank of comm to move to another node: each one
// calls it (it is collective over comm) with where it wants to go: host
// (a node of the job, "" for any), or the node of world rank nearRank (-1
// for none), or just off its node (opts.OffNode; also the default when
// neither is given). The request goes to gompirun as a predicted fault of
// those ranks, which the job's ErrMgr crmig acts on; Migrate returns once
// gompirun has accepted it (an error says why not: C/R off, no crmig, an
// unknown host). The ranks move at the job's next safe point, as an
// asynchronous checkpoint is taken: each moved rank goes on in a new
// process on its new node from that safe point (OnRestart callbacks run
// there), the others wait at it meanwhile. Ranks outside comm take part
// only through their safe points.
func (c *Coordinator) Migrate(ctx context.Context, comm *mpi.Comm, host string, nearRank int, opts MigrateOptions) error {
	if comm == nil {
		return errors.New("cr: migrate: no communicator")
	}
	if nearRank < -1 || nearRank >= c.p.Size() {
		return fmt.Errorf("cr: migrate: near rank %d: want -1 (none) or a world rank below %d", nearRank, c.p.Size())
	}
	if len(host) > maxHost {
		return fmt.Errorf("cr: migrate: host name of %d bytes: at most %d", len(host), maxHost)
	}
	w := errmgr.MigrateWish{Rank: c.p.Rank(), Host: host, Near: nearRank, OffNode: opts.OffNode || (host == "" && nearRank < 0)}
	all := make([]byte, wishLen*comm.Size())
	if err := comm.Gather(encodeWish(w), all, 0); err != nil {
		return fmt.Errorf("cr: migrate: gather the wishes: %w", err)
	}
	var askErr error
	if comm.Rank() == 0 {
		wishes := make([]errmgr.MigrateWish, comm.Size())
		for i := range wishes {
			wishes[i] = decodeWish(all[i*wishLen : (i+1)*wishLen])
		}
		if m, ok := c.link.(migrator); ok {
			askErr = m.Migrate(ctx, wishes)
		} else {
			askErr = fmt.Errorf("cr: migrate: %w", ErrNoCoordinator)
		}
	}
	// Every rank of comm learns the outcome from the leader.
	out := make([]byte, outcomeLen)
	if askErr != nil {
		out[0] = 1
		copy(out[1:], askErr.Error())
	}
	if err := comm.Bcast(out, 0); err != nil {
		return fmt.Errorf("cr: migrate: %w", err)
	}
	switch {
	case askErr != nil:
		return askErr
	case out[0] != 0:
		return fmt.Errorf("cr: migrate: refused: %s", bytes.TrimRight(out[1:], "\x00"))
	}
	return nil
}

// A wish travels as a fixed record: rank, near (int64), off-node, host
// length, host.
const (
	maxHost    = 255
	wishLen    = 8 + 8 + 1 + 1 + maxHost
	outcomeLen = 1024
)

func encodeWish(w errmgr.MigrateWish) []byte {
	b := make([]byte, wishLen)
	binary.LittleEndian.PutUint64(b, uint64(int64(w.Rank)))
	binary.LittleEndian.PutUint64(b[8:], uint64(int64(w.Near)))
	if w.OffNode {
		b[16] = 1
	}
	b[17] = byte(len(w.Host))
	copy(b[18:], w.Host)
	return b
}

func decodeWish(b []byte) errmgr.MigrateWish {
	n := min(int(b[17]), maxHost)
	return errmgr.MigrateWish{Rank: int(int64(binary.LittleEndian.Uint64(b))), Near: int(int64(binary.LittleEndian.Uint64(b[8:]))),
		OffNode: b[16] == 1, Host: string(b[18 : 18+n])}
}

// Migrate is Coordinator.Migrate on the default coordinator.
func Migrate(ctx context.Context, comm *mpi.Comm, host string, nearRank int, opts MigrateOptions) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.Migrate(ctx, comm, host, nearRank, opts)
}
