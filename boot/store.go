package boot

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"gompi/frameworks/filem"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// MetaStore returns where ref's global metadata is read and written: this
// node's file system, or, for a remote reference, the process's FileM
// module, selected here with what reaches ref laid under the explicit
// parameters (remoteValues). A remote reference it writes is recorded in
// the user's snapshot index, so that tools find it by name and reach it
// with the same settings. close releases the module (its connections).
func (p *Process) MetaStore(ctx context.Context, ref snapshot.Ref) (ms snapshot.MetaStore, close func(), err error) {
	if !ref.IsRemote() {
		return snapshot.ThisNode, func() {}, nil
	}
	index, _ := snapshot.IndexPath() // without a home folder there is no index
	vals, err := p.remoteValues(ref, index)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot reference %s: %w", ref, err)
	}
	log := p.FrameworkLogger(filem.Name)
	c, err := p.Frameworks.FileM.SelectOne(ctx, vals, p.Role, log)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot reference %s is remote: choose a FileM that reaches it (--mca filem sftp or rsh): %w", ref, err)
	}
	ms, err = snapshot.MetaStoreFor(ref, c.Module, sstore.GroupReadable(p.Values))
	if err != nil {
		return nil, nil, err
	}
	if index != "" {
		ms = snapshot.Indexed(ms, index, indexSettings(c.Info.Name, vals), func(err error) { log.Warn("snapshot index", "err", err) })
	}
	return ms, func() {
		if cl, ok := c.Module.(io.Closer); ok {
			cl.Close()
		}
	}, nil
}

// RemoteSettings are what reaches ref, to be laid under the parameters
// set explicitly: the FileM its location implies (filem.Infer: sftp,
// unless filem is set), then the settings its entry in the user's
// snapshot index keeps (the FileM and sftp's known_hosts and identity
// files of the job that wrote it). None for a reference on this node.
func (p *Process) RemoteSettings(ref snapshot.Ref) ([]mca.Setting, error) {
	index, _ := snapshot.IndexPath()
	return p.remoteSettings(ref, index)
}

func (p *Process) remoteSettings(ref snapshot.Ref, index string) ([]mca.Setting, error) {
	l, err := ref.Location()
	if err != nil {
		return nil, err
	}
	over, err := filem.Infer(l, p.Values)
	if err != nil || l.Host == "" || index == "" || ref.Name == "" {
		return over, err
	}
	e, ok, err := snapshot.LookupIndex(index, ref.Name, ref.Dir)
	if err != nil || !ok {
		return over, err
	}
	for _, s := range e.Settings {
		if p.Values.Get(s.Name).Origin.Source.Explicit() {
			continue // set explicitly: it wins
		}
		over = slices.DeleteFunc(over, func(o mca.Setting) bool { return o.Name == s.Name })
		over = append(over, s)
	}
	return over, nil
}

// remoteValues are the process's values with RemoteSettings laid under
// the explicit ones.
func (p *Process) remoteValues(ref snapshot.Ref, index string) (*mca.Values, error) {
	over, err := p.remoteSettings(ref, index)
	if err != nil {
		return nil, err
	}
	return p.layered(over)
}

// LayInferred replaces the process's values with over laid under the
// explicit ones (over comes from filem.Infer and the like, which leave
// alone what a user set): from here on the process, and the daemons and
// ranks it hands its changed values to, run with them.
func (p *Process) LayInferred(over []mca.Setting) error {
	vals, err := p.layered(over)
	if err != nil {
		return err
	}
	p.Values = vals
	return nil
}

// layered is the process's values with over replacing theirs.
func (p *Process) layered(over []mca.Setting) (*mca.Values, error) {
	if len(over) == 0 {
		return p.Values, nil
	}
	all := p.Values.All()
	for _, s := range over {
		for i := range all {
			if all[i].Name == s.Name {
				all[i] = s
			}
		}
	}
	return p.Params.ResolveSettings(all)
}

// indexSettings are what the index keeps of the FileM chosen (name) for a
// remote reference: its name, and for sftp the known_hosts and identity
// files set (absolute: a tool may run elsewhere), never their contents.
func indexSettings(name string, vals *mca.Values) []mca.Setting {
	out := []mca.Setting{{Name: filem.Name, Value: name}}
	if name != filem.SFTP {
		return out
	}
	for _, param := range []string{filem.ParamSFTPKnownHosts, filem.ParamSFTPIdentity} {
		s := vals.Get(param)
		if s.Origin.Source == mca.SourceDefault || s.Value == "" {
			continue
		}
		paths := mca.SplitList(s.Value)
		for i, f := range paths {
			if abs, err := filepath.Abs(f); err == nil && !strings.HasPrefix(f, "~") {
				paths[i] = abs
			}
		}
		out = append(out, mca.Setting{Name: param, Value: strings.Join(paths, ",")})
	}
	return out
}
