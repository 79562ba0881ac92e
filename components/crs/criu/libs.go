package crscriu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// The files a dumped tree maps executable besides its programs: shared
// libraries (a C rank maps gompi's libmpi_abi.so.1, libc, ...). CRIU maps
// them again at a restore from their paths and, as for the programs,
// fails when one changed size ("File ... has bad size", at the end of its
// log), which is what a rebuilt libmpi or an upgraded libc looks like. So
// the dump records each once (criu_lib_N: "SIZE PATH"), and a restore
// compares them with the programs (checkExes), naming the library.

const metaLibPrefix = "criu_lib_"

// recordLibs adds to meta each file mapped executable by any of pids,
// once a path, other than the programs recordExes recorded. Files deleted
// since they were mapped (CRIU saves those itself) and memory files are
// left out.
func recordLibs(pids []int, meta map[string]string) error {
	seen := map[string]bool{}
	for k, v := range meta {
		if _, path, ok := strings.Cut(v, " "); ok && strings.HasPrefix(k, metaExePrefix) {
			seen[path] = true
		}
	}
	n := 0
	for _, p := range pids {
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", p))
		if errors.Is(err, fs.ErrNotExist) {
			continue // ended meanwhile
		}
		if err != nil {
			return fmt.Errorf("the mappings of pid %d: %w", p, err)
		}
		for line := range strings.Lines(string(maps)) {
			// address perms offset dev inode [path]
			f := strings.Fields(line)
			if len(f) < 6 || !strings.Contains(f[1], "x") {
				continue
			}
			path := strings.Join(f[5:], " ")
			if !strings.HasPrefix(path, "/") || strings.HasSuffix(path, " (deleted)") || strings.HasPrefix(path, "/memfd:") || seen[path] {
				continue
			}
			// Through the mapping: the file the process maps, even replaced since.
			fi, err := os.Stat(fmt.Sprintf("/proc/%d/map_files/%s", p, f[0]))
			if err != nil {
				if fi, err = os.Stat(path); err != nil {
					continue // unmapped meanwhile
				}
			}
			seen[path] = true
			meta[metaLibPrefix+strconv.Itoa(n)] = strconv.FormatInt(fi.Size(), 10) + " " + path
			n++
		}
	}
	return nil
}

// libChanged says why the library at path, size bytes at the dump and
// now stat'ed as fi (or failing with statErr), cannot be mapped again.
func libChanged(path string, size int64, fi os.FileInfo, statErr error) error {
	const what = "CRIU restores a process only with the files it mapped; restore with the libraries of the checkpoint (a C rank maps gompi's libmpi_abi.so.1 and the C library)"
	switch {
	case statErr != nil:
		return fmt.Errorf("the library %s, which the checkpointed process mapped, is not there any more (%w): %s", path, statErr, what)
	case fi.Size() != size:
		return fmt.Errorf("the library %s changed since the checkpoint (%d bytes then, %d now): %s", path, size, fi.Size(), what)
	}
	return nil
}
