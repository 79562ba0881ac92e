package crscriu

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gompi/frameworks/crs"
)

// What a dumped tree may hold and what the restore must be given, found
// in /proc before CRIU is asked: CRIU would refuse a socket to a peer
// outside the tree itself, but only after freezing the tree, and with a
// message about its own options; gompi's ranks close their sockets before
// a dump (the library's quiesce), so a socket at dump time is a rank that
// did not, named here.

// metaFD is the Meta key recording what the root held as descriptor n
// when it was a pipe ("pipe:[inode]", CRIU's inherit-fd key for it).
func metaFD(n int) string { return metaFDPrefix + strconv.Itoa(n) }

const metaFDPrefix = "criu_fd_"

// Meta keys besides metaFD's.
const (
	metaPID     = "criu_pid"     // the dumped root's PID
	metaTree    = "criu_tree"    // how many processes were dumped
	metaVersion = "criu_version" // the CRIU that dumped them
)

// tree lists pid and its descendants, pid first, each before its
// children (from /proc/PID/task/TID/children).
func tree(pid int) ([]int, error) {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", out[i]))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && i > 0 {
				continue // a child exited meanwhile: CRIU freezes what is left
			}
			return nil, fmt.Errorf("list the threads of pid %d: %w", out[i], err)
		}
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", out[i], t.Name()))
			if err != nil {
				continue // the thread ended
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil && !slices.Contains(out, c) {
					out = append(out, c)
				}
			}
		}
	}
	return out, nil
}

// descriptors reads pid's open descriptors: number -> what /proc shows
// for it ("pipe:[12]", "socket:[34]", a path, "anon_inode:[eventfd]").
func descriptors(pid int) (map[int]string, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list the descriptors of pid %d: %w", pid, err)
	}
	out := map[int]string{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		out[n] = target
	}
	return out, nil
}

// inspect checks the tree rooted at pid holds nothing crs=criu does not
// dump (sockets, files open for writing it cannot save), and returns the
// Meta recording the root's pipes, how many processes it holds and the
// regular files open for writing in it (files.go), each once.
func inspect(pid int) (meta map[string]string, procs int, files []string, err error) {
	pids, err := tree(pid)
	if err != nil {
		return nil, 0, nil, err
	}
	meta = map[string]string{metaPID: strconv.Itoa(pid), metaTree: strconv.Itoa(len(pids))}
	if err := recordExes(pids, meta); err != nil {
		return nil, 0, nil, err
	}
	if err := recordLibs(pids, meta); err != nil {
		return nil, 0, nil, err
	}
	for _, p := range pids {
		fds, err := descriptors(p)
		if err != nil {
			if p != pid && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, 0, nil, err
		}
		for _, n := range slices.Sorted(maps.Keys(fds)) {
			target := fds[n]
			if strings.HasPrefix(target, "socket:[") {
				return nil, 0, nil, fmt.Errorf("%w: pid %d (%s) holds descriptor %d, %s (%s): crs=criu dumps no sockets; a rank's library closes its own before the dump, so this is a socket the program opened itself",
					crs.ErrNotCheckpointable, p, command(p), n, target, socketKind(p, target))
			}
			save, err := toSave(p, n, target)
			if err != nil {
				return nil, 0, nil, err
			}
			if save && !slices.Contains(files, target) {
				files = append(files, target)
			}
			if p == pid && strings.HasPrefix(target, "pipe:[") {
				meta[metaFD(n)] = target
			}
		}
	}
	return meta, len(pids), files, nil
}

// command is pid's command name, for messages.
func command(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// socketKind says what kind of socket target ("socket:[ino]") is, from
// pid's network namespace's tables: "a tcp socket to 10.0.0.2:80" or "a
// unix socket"; "a socket" when no table lists it.
func socketKind(pid int, target string) string {
	ino := strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")
	for _, table := range []string{"tcp", "tcp6", "udp", "udp6", "unix", "raw", "raw6", "netlink", "packet"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		kind := ""
		sc := bufio.NewScanner(f)
		for sc.Scan() && kind == "" {
			fields := strings.Fields(sc.Text())
			if col := inodeColumn(table); col < len(fields) && fields[col] == ino {
				kind = "a " + table + " socket"
				if strings.HasPrefix(table, "tcp") || strings.HasPrefix(table, "udp") {
					kind += " (local " + fields[1] + ", remote " + fields[2] + ", hex)"
				}
			}
		}
		f.Close()
		if kind != "" {
			return kind
		}
	}
	return "a socket"
}

// inodeColumn is the column of the inode in a /proc/net table.
func inodeColumn(table string) int {
	switch table {
	case "unix":
		return 6
	case "netlink":
		return 9
	case "packet":
		return 8
	}
	return 9 // tcp, udp, raw (and their 6 forms)
}
