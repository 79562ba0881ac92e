package full

import (
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
)

// retain applies sstore_base_keep once a checkpoint of the whole job has
// committed: the coordinator runs one request at a time, so no other
// sequence is being written, and it alone rewrites the metadata while the
// job runs. A failure is reported and leaves the commit as it is: the
// sequences it meant to remove stay, which costs space, not correctness.
// A migration's commit does not retain: its sequence is in use until the
// moved ranks restart from it.
func (c *ckpt) retain() {
	keep := sstore.Keep(c.g.spec.Values)
	if keep <= 0 {
		return
	}
	if c.ref.IsRemote() {
		c.g.log.Warn("sstore_base_keep applies to a reference on gompirun's node; this one is remote and keeps every sequence", "ref", c.ref.String())
		return
	}
	gone := c.meta.Prunable(keep, c.seq)
	orphans, err := snapshot.Orphans(c.ref, c.meta)
	if err == nil {
		gone = append(gone, orphans...)
	}
	if err == nil && len(gone) > 0 {
		err = snapshot.RemoveSeqs(c.ref, c.meta, gone)
	}
	if err != nil {
		c.g.log.Warn("sequences beyond sstore_base_keep not removed", "ref", c.ref.String(), "keep", keep, "err", err)
		return
	}
	if len(gone) > 0 {
		c.meta = c.meta.Without(gone)
		c.g.log.Info("sequences beyond sstore_base_keep removed", "ref", c.ref.String(), "keep", keep, "removed", gone)
	}
}
