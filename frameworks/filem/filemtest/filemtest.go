// Package filemtest is the conformance kit every FileM component must pass,
// in-process and through the plugin bridge. It drives a module against
// directories on this node (Host ""), so it applies to any component that
// can reach the local file system.
package filemtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"gompi/frameworks/filem"
)

// Run runs the kit. newModule returns a fresh module for each subtest.
func Run(t *testing.T, newModule func(t *testing.T) filem.Module) {
	t.Helper()
	for _, d := range directions {
		t.Run("file/"+d.name, func(t *testing.T) { testFile(t, newModule(t), d) })
		t.Run("tree/"+d.name, func(t *testing.T) { testTree(t, newModule(t), d) })
		t.Run("overwrite/"+d.name, func(t *testing.T) { testOverwrite(t, newModule(t), d) })
		t.Run("parents/"+d.name, func(t *testing.T) { testParents(t, newModule(t), d, 0) })
		t.Run("parents-0750/"+d.name, func(t *testing.T) { testParents(t, newModule(t), d, 0o750) })
		t.Run("missing-source/"+d.name, func(t *testing.T) { testMissingSource(t, newModule(t), d) })
		t.Run("one-bad-in-batch/"+d.name, func(t *testing.T) { testOneBad(t, newModule(t), d) })
		t.Run("cancelled/"+d.name, func(t *testing.T) { testCancelled(t, newModule(t), d) })
	}
	t.Run("remove", func(t *testing.T) { testRemove(t, newModule(t)) })
	t.Run("concurrent-batch", func(t *testing.T) { testConcurrent(t, newModule(t)) })
}

// direction is Put or Get seen as "copy src to dst".
type direction struct {
	name string
	// transfer builds the Transfer that copies src to dst.
	transfer func(src, dst string) filem.Transfer
	do       func(ctx context.Context, m filem.Module, ts []filem.Transfer) error
}

var directions = []direction{
	{"put",
		func(src, dst string) filem.Transfer {
			return filem.Transfer{Local: src, Remote: filem.Remote{Path: dst}}
		},
		func(ctx context.Context, m filem.Module, ts []filem.Transfer) error { return m.Put(ctx, ts) }},
	{"get",
		func(src, dst string) filem.Transfer {
			return filem.Transfer{Local: dst, Remote: filem.Remote{Path: src}}
		},
		func(ctx context.Context, m filem.Module, ts []filem.Transfer) error { return m.Get(ctx, ts) }},
}

func (d direction) copy(t *testing.T, m filem.Module, pairs ...string) error {
	t.Helper()
	var ts []filem.Transfer
	for i := 0; i+1 < len(pairs); i += 2 {
		ts = append(ts, d.transfer(pairs[i], pairs[i+1]))
	}
	return d.do(t.Context(), m, ts)
}

// entry is one thing in a tree: a directory, a file or a symlink.
type entry struct {
	dir     bool
	mode    fs.FileMode
	content string
	link    string
}

func file(mode fs.FileMode, content string) entry { return entry{mode: mode, content: content} }
func dir(mode fs.FileMode) entry                  { return entry{dir: true, mode: mode} }

// anyMode marks an entry whose mode the kit does not prescribe: parent
// directories a component creates take whatever mode it and the umask give.
const anyMode = fs.ModeIrregular

var sampleTree = map[string]entry{
	"":             dir(0o750),
	"top.txt":      file(0o644, "top level\n"),
	"empty":        file(0o600, ""),
	"run.sh":       file(0o755, "#!/bin/sh\necho hi\n"),
	"a":            dir(0o700),
	"a/one":        file(0o640, strings.Repeat("one ", 1000)),
	"a/b":          dir(0o755),
	"a/b/two.bin":  file(0o600, string(bytes.Repeat([]byte{0, 1, 2, 255}, 70000))),
	"a/b/c":        dir(0o711),
	"a/b/c/deep":   file(0o444, "deep"),
	"a/emptydir":   dir(0o755),
	"a/link-to-up": {link: "../top.txt"},
}

// build creates the entries under root ("" is root itself).
func build(t *testing.T, root string, tree map[string]entry) {
	t.Helper()
	names := make([]string, 0, len(tree))
	for n := range tree {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e, p := tree[n], filepath.Join(root, n)
		var err error
		switch {
		case e.dir:
			err = os.MkdirAll(p, 0o700)
		case e.link != "":
			err = os.Symlink(e.link, p)
		default:
			err = os.WriteFile(p, []byte(e.content), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Modes last, deepest first, so read-only directories can be filled.
	for i := len(names) - 1; i >= 0; i-- {
		if e := tree[names[i]]; e.link == "" {
			if err := os.Chmod(filepath.Join(root, names[i]), e.mode); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// scan reads everything under root (root itself as "") back into entries.
func scan(t *testing.T, root string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			rel = ""
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entry{mode: fi.Mode().Perm() | fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)}
		switch {
		case fi.IsDir():
			e.dir = true
		case fi.Mode()&fs.ModeSymlink != 0:
			e = entry{}
			if e.link, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.content = string(b)
		}
		out[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		t.Fatalf("scan %s: %v", root, err)
	}
	return out
}

// sameTree fails unless got holds exactly want.
func sameTree(t *testing.T, what string, got, want map[string]entry) {
	t.Helper()
	for n, w := range want {
		g, ok := got[n]
		switch {
		case !ok:
			t.Errorf("%s: %q is missing", what, n)
		case g.dir != w.dir || g.link != w.link:
			t.Errorf("%s: %q: got dir=%v link=%q, want dir=%v link=%q", what, n, g.dir, g.link, w.dir, w.link)
		case g.link == "" && w.mode != anyMode && g.mode != w.mode:
			t.Errorf("%s: %q: mode %v, want %v", what, n, g.mode, w.mode)
		case g.content != w.content:
			t.Errorf("%s: %q: content differs (%d bytes, want %d)", what, n, len(g.content), len(w.content))
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s: unexpected %q (a stray temporary file?)", what, n)
		}
	}
}

// under prefixes every name of tree with dir.
func under(dir string, tree map[string]entry) map[string]entry {
	out := map[string]entry{}
	for n, e := range tree {
		if n == "" {
			out[dir] = e
		} else {
			out[dir+"/"+n] = e
		}
	}
	return out
}

func merge(trees ...map[string]entry) map[string]entry {
	out := map[string]entry{"": dir(0)}
	for _, tr := range trees {
		for n, e := range tr {
			out[n] = e
		}
	}
	return out
}

// workspace is an empty directory whose own mode is ignored by checks.
func workspace(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	return root
}

// checkAll compares the whole workspace with want (whose "" entry is the
// workspace itself), so any leftover temporary file fails the test.
func checkAll(t *testing.T, root string, want map[string]entry) {
	t.Helper()
	want[""] = dir(0o700)
	sameTree(t, root, scan(t, root), want)
}

func testFile(t *testing.T, m filem.Module, d direction) {
	root := workspace(t)
	src, dst := filepath.Join(root, "src.txt"), filepath.Join(root, "dst.txt")
	one := map[string]entry{"src.txt": file(0o640, "hello, filem\n")}
	build(t, root, one)
	if err := d.copy(t, m, src, dst); err != nil {
		t.Fatalf("%s %s -> %s: %v", d.name, src, dst, err)
	}
	checkAll(t, root, merge(one, map[string]entry{"dst.txt": one["src.txt"]}))
}

func testTree(t *testing.T, m filem.Module, d direction) {
	root := workspace(t)
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	build(t, src, sampleTree)
	if err := d.copy(t, m, src, dst); err != nil {
		t.Fatalf("%s %s -> %s: %v", d.name, src, dst, err)
	}
	checkAll(t, root, merge(under("src", sampleTree), under("dst", sampleTree)))
}

func testOverwrite(t *testing.T, m filem.Module, d direction) {
	root := workspace(t)
	newFile := map[string]entry{"new.txt": file(0o600, "new")}
	oldTree := map[string]entry{
		"":          dir(0o755),
		"stale":     file(0o644, "must disappear"),
		"a":         dir(0o755),
		"a/one":     file(0o644, "old one, longer than the new one would be"),
		"a/b/c":     file(0o644, "a file where the source has a directory"),
		"a/b":       dir(0o755),
		"extra":     dir(0o755),
		"extra/old": file(0o644, "old"),
	}
	build(t, root, newFile)
	build(t, root, map[string]entry{"old.txt": file(0o644, strings.Repeat("old content ", 100))})
	build(t, filepath.Join(root, "src"), sampleTree)
	build(t, filepath.Join(root, "dst"), oldTree)
	err := d.copy(t, m,
		filepath.Join(root, "new.txt"), filepath.Join(root, "old.txt"),
		filepath.Join(root, "src"), filepath.Join(root, "dst"))
	if err != nil {
		t.Fatalf("%s over existing destinations: %v", d.name, err)
	}
	checkAll(t, root, merge(newFile, map[string]entry{"old.txt": newFile["new.txt"]},
		under("src", sampleTree), under("dst", sampleTree)))
}

// testParents copies into missing parents, which the module must create
// with the transfers' DirMode (0: filem.DefaultDirMode), whatever the
// umask, while what is copied keeps its own modes.
func testParents(t *testing.T, m filem.Module, d direction, dirMode fs.FileMode) {
	root := workspace(t)
	build(t, root, map[string]entry{"f": file(0o644, "f"), "t": dir(0o750), "t/x": file(0o600, "x")})
	ts := []filem.Transfer{
		d.transfer(filepath.Join(root, "f"), filepath.Join(root, "p", "q", "r", "f")),
		d.transfer(filepath.Join(root, "t"), filepath.Join(root, "p", "s", "t")),
	}
	for i := range ts {
		ts[i].DirMode = dirMode
	}
	if err := d.do(t.Context(), m, ts); err != nil {
		t.Fatalf("%s into missing parents: %v", d.name, err)
	}
	want := dirMode
	if want == 0 {
		want = filem.DefaultDirMode
	}
	got := scan(t, root)
	for _, n := range []string{"p", "p/q", "p/q/r", "p/s"} {
		if e, ok := got[n]; !ok || !e.dir {
			t.Errorf("parent %q was not created", n)
		} else if e.mode != want {
			t.Errorf("parent %q created with mode %04o, want %04o", n, e.mode, want)
		}
	}
	for _, c := range []struct {
		name string
		want entry
	}{{"p/q/r/f", file(0o644, "f")}, {"p/s/t", dir(0o750)}, {"p/s/t/x", file(0o600, "x")}} {
		if g := got[c.name]; g != c.want {
			t.Errorf("%q = %+v, want %+v", c.name, g, c.want)
		}
	}
	if len(got) != 11 {
		t.Errorf("workspace holds %d entries, want 11 (stray files?): %v", len(got), keys(got))
	}
}

func keys(m map[string]entry) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TransferErrors returns every *filem.TransferError in err's tree, in order.
func TransferErrors(err error) []*filem.TransferError {
	var out []*filem.TransferError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if te, ok := err.(*filem.TransferError); ok {
			out = append(out, te)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

func testMissingSource(t *testing.T, m filem.Module, d direction) {
	root := workspace(t)
	src, dst := filepath.Join(root, "nothing-here"), filepath.Join(root, "out", "dst")
	err := d.copy(t, m, src, dst)
	if err == nil {
		t.Fatalf("%s of a missing source succeeded", d.name)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %q does not wrap fs.ErrNotExist", err)
	}
	var te *filem.TransferError
	if !errors.As(err, &te) {
		t.Fatalf("error %q (%T) holds no *filem.TransferError", err, err)
	}
	if te.Src != src || te.Op != d.name {
		t.Errorf("TransferError names op %q source %q, want %q %q", te.Op, te.Src, d.name, src)
	}
	if !strings.Contains(err.Error(), src) {
		t.Errorf("error %q does not name the source %s", err, src)
	}
	if _, err := os.Lstat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("destination %s exists after a failed transfer (%v)", dst, err)
	}
	for n := range scan(t, root) {
		if n != "" && n != "out" {
			t.Errorf("stray %q after a failed transfer", n)
		}
	}
}

func testOneBad(t *testing.T, m filem.Module, d direction) {
	root := workspace(t)
	build(t, root, map[string]entry{"in": dir(0o755), "in/a": file(0o644, "a"), "in/c": file(0o600, "c")})
	bad := filepath.Join(root, "in", "b-missing")
	err := d.copy(t, m,
		filepath.Join(root, "in", "a"), filepath.Join(root, "out", "a"),
		bad, filepath.Join(root, "out", "b"),
		filepath.Join(root, "in", "c"), filepath.Join(root, "out", "c"))
	if err == nil {
		t.Fatal("a batch with a missing source succeeded")
	}
	tes := TransferErrors(err)
	if len(tes) != 1 {
		t.Fatalf("batch error %q holds %d transfer errors, want exactly 1 (the bad one)", err, len(tes))
	}
	if tes[0].Src != bad || !errors.Is(tes[0], fs.ErrNotExist) {
		t.Errorf("transfer error %+v: want source %s wrapping fs.ErrNotExist", tes[0], bad)
	}
	checkAll(t, root, map[string]entry{
		"in": dir(0o755), "in/a": file(0o644, "a"), "in/c": file(0o600, "c"),
		"out": dir(anyMode), "out/a": file(0o644, "a"), "out/c": file(0o600, "c"),
	})
}

func testCancelled(t *testing.T, m filem.Module, d direction) {
	root := workspace(t)
	before := map[string]entry{
		"f":   file(0o644, strings.Repeat("x", 3<<20)),
		"old": file(0o644, "old"),
	}
	build(t, root, before)
	build(t, filepath.Join(root, "tree"), sampleTree)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := d.do(ctx, m, []filem.Transfer{
		d.transfer(filepath.Join(root, "f"), filepath.Join(root, "old")),
		d.transfer(filepath.Join(root, "tree"), filepath.Join(root, "tree2")),
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%s with a cancelled context: %v, want an error wrapping context.Canceled", d.name, err)
	}
	checkAll(t, root, merge(before, under("tree", sampleTree)))
}

func testRemove(t *testing.T, m filem.Module) {
	root := workspace(t)
	build(t, root, map[string]entry{"keep": file(0o644, "keep"), "f": file(0o644, "f")})
	build(t, filepath.Join(root, "tree"), sampleTree)
	at := func(n string) filem.Remote { return filem.Remote{Path: filepath.Join(root, n)} }
	if err := m.Remove(t.Context(), []filem.Remote{at("f"), at("tree"), at("never-existed")}); err != nil {
		t.Fatalf("remove: %v", err)
	}
	checkAll(t, root, map[string]entry{"keep": file(0o644, "keep")})
	if err := m.Remove(t.Context(), []filem.Remote{at("f")}); err != nil {
		t.Errorf("removing an already removed file: %v, want no error", err)
	}
	if err := m.Remove(t.Context(), nil); err != nil {
		t.Errorf("empty remove batch: %v", err)
	}
}

func testConcurrent(t *testing.T, m filem.Module) {
	root := workspace(t)
	const n = 20
	in := map[string]entry{"in": dir(0o755)}
	var puts, gets []filem.Transfer
	var rms []filem.Remote
	for i := range n {
		name := fmt.Sprintf("f%02d", i)
		in["in/"+name] = file(fs.FileMode(0o600|(i%2)*0o044), strings.Repeat(name, 1000*(i+1)))
		puts = append(puts, filem.Transfer{Local: filepath.Join(root, "in", name), Remote: filem.Remote{Path: filepath.Join(root, "mid", name)}})
		gets = append(gets, filem.Transfer{Local: filepath.Join(root, "back", name), Remote: filem.Remote{Path: filepath.Join(root, "mid", name)}})
		rms = append(rms, filem.Remote{Path: filepath.Join(root, "mid", name)})
	}
	build(t, root, in)
	if err := m.Put(t.Context(), puts); err != nil {
		t.Fatalf("put %d files: %v", n, err)
	}
	if err := m.Get(t.Context(), gets); err != nil {
		t.Fatalf("get %d files: %v", n, err)
	}
	want := merge(in)
	for k, e := range in {
		if k == "in" {
			want["mid"], want["back"] = dir(anyMode), dir(anyMode)
			continue
		}
		want["mid/"+strings.TrimPrefix(k, "in/")] = e
		want["back/"+strings.TrimPrefix(k, "in/")] = e
	}
	checkAll(t, root, want)
	if err := m.Remove(t.Context(), rms); err != nil {
		t.Fatalf("remove %d files: %v", n, err)
	}
	for k := range want {
		if strings.HasPrefix(k, "mid/") {
			delete(want, k)
		}
	}
	checkAll(t, root, want)
}
