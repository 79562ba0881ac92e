package boot

import (
	"context"
	"fmt"
	"io"

	"gompi/frameworks/filem"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
)

// MetaStore returns where ref's global metadata is read and written: this
// node's file system, or, for a remote reference, the process's FileM
// module, selected here. close releases that module (its connections).
func (p *Process) MetaStore(ctx context.Context, ref snapshot.Ref) (ms snapshot.MetaStore, close func(), err error) {
	if !ref.IsRemote() {
		return snapshot.ThisNode, func() {}, nil
	}
	c, err := p.Frameworks.FileM.SelectOne(ctx, p.Values, p.Role, p.FrameworkLogger(filem.Name))
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot reference %s is remote: choose a FileM that reaches it (--mca filem sftp or rsh): %w", ref, err)
	}
	ms, err = snapshot.MetaStoreFor(ref, c.Module, sstore.GroupReadable(p.Values))
	if err != nil {
		return nil, nil, err
	}
	return ms, func() {
		if cl, ok := c.Module.(io.Closer); ok {
			cl.Close()
		}
	}, nil
}
