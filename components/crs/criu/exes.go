package crscriu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

	"gompi/frameworks/crs"
)

// The programs a dumped tree runs. CRIU maps each process's executable
// again at a restore and refuses when its size changed ("File ... has bad
// size", in its log), which is what a rebuilt or upgraded program, or
// gompid (a rank's init is gompid re-executed), looks like. So the dump
// records each one's path and size (criu_exe_N: "SIZE PATH"), and a
// restore compares them before CRIU runs, saying which program changed
// and what to do.

const metaExePrefix = "criu_exe_"

// recordExes adds to meta the executable of each of pids, once a path.
func recordExes(pids []int, meta map[string]string) error {
	seen := map[string]bool{}
	for _, p := range pids {
		path, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p))
		if errors.Is(err, fs.ErrNotExist) {
			continue // ended meanwhile
		}
		if err != nil {
			return fmt.Errorf("the program of pid %d: %w", p, err)
		}
		path = strings.TrimSuffix(path, " (deleted)")
		if seen[path] {
			continue
		}
		// Through the link: the file the process runs, even replaced since.
		fi, err := os.Stat(fmt.Sprintf("/proc/%d/exe", p))
		if err != nil {
			return fmt.Errorf("the program of pid %d: %w", p, err)
		}
		seen[path] = true
		meta[metaExePrefix+strconv.Itoa(len(seen)-1)] = strconv.FormatInt(fi.Size(), 10) + " " + path
	}
	return nil
}

// checkExes refuses a restore whose programs or libraries (libs.go) are
// gone or changed size since the dump.
func checkExes(meta map[string]string) error {
	var keys []string
	for k := range meta {
		if strings.HasPrefix(k, metaExePrefix) || strings.HasPrefix(k, metaLibPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		sizeText, path, ok := strings.Cut(meta[k], " ")
		size, err := strconv.ParseInt(sizeText, 10, 64)
		if !ok || err != nil || !strings.HasPrefix(path, "/") {
			return fmt.Errorf("%w: the snapshot's metadata %s = %q is not a size and a path", crs.ErrNoSnapshot, k, meta[k])
		}
		fi, err := os.Stat(path)
		if strings.HasPrefix(k, metaLibPrefix) {
			if err := libChanged(path, size, fi, err); err != nil {
				return err
			}
			continue
		}
		switch {
		case err != nil:
			return fmt.Errorf("the program %s, which the checkpointed process ran, is not there any more (%w): CRIU restores a process only with the programs it ran; put it back (a rank's init is gompid)", path, err)
		case fi.Size() != size:
			return fmt.Errorf("the program %s changed since the checkpoint (%d bytes then, %d now): CRIU restores a process only with the programs it ran; restore with the gompi and program of the checkpoint (a rank's init is gompid)", path, size, fi.Size())
		}
	}
	return nil
}
