package filem

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// Broadcast copies the local file or directory to every destination (to
// preload snapshot files onto the nodes before a restart), as one batch:
// the module moves them concurrently, up to its own bound. The error joins
// one *TransferError per destination that failed; the others are in place.
func Broadcast(ctx context.Context, m Module, local string, to []Remote) error {
	if len(to) == 0 {
		return nil
	}
	ts := make([]Transfer, len(to))
	for i, r := range to {
		ts[i] = Transfer{Local: local, Remote: r}
	}
	if err := m.Put(ctx, ts); err != nil {
		return fmt.Errorf("filem: broadcast %s to %d destinations: %w", local, len(to), err)
	}
	return nil
}

// Gather copies every source into localDir under the source's base name,
// as one batch. Sources must have distinct base names (a rank's snapshot
// directory, say); the error joins one *TransferError per source that
// failed, and what arrived stays.
func Gather(ctx context.Context, m Module, from []Remote, localDir string) error {
	if len(from) == 0 {
		return nil
	}
	ts := make([]Transfer, len(from))
	seen := map[string]Remote{}
	for i, r := range from {
		base := path.Base(strings.TrimRight(r.Path, "/"))
		if r.Path == "" || base == "/" || base == "." || base == ".." {
			return fmt.Errorf("filem: gather %s: the source has no file name to keep in %s", r, localDir)
		}
		if prev, dup := seen[base]; dup {
			return fmt.Errorf("filem: gather into %s: %s and %s have the same name %q; gather them into different directories", localDir, prev, r, base)
		}
		seen[base] = r
		ts[i] = Transfer{Local: filepath.Join(localDir, base), Remote: r}
	}
	if err := m.Get(ctx, ts); err != nil {
		return fmt.Errorf("filem: gather %d sources into %s: %w", len(from), localDir, err)
	}
	return nil
}
