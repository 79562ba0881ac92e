package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stdLogLine is the standard library's log format (and slog's default
// handler's): what no process of a job may write.
var stdLogLine = regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d `)

// parseLogLine reads one line of the job's log format: key=value pairs,
// values bare or Go-quoted, beginning with time, level and msg, no key
// twice.
func parseLogLine(line string) (map[string]string, error) {
	kv := map[string]string{}
	var keys []string
	for rest := line; rest != ""; {
		k, v, ok := strings.Cut(rest, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \"") {
			return nil, fmt.Errorf("no key=value at %q", rest)
		}
		if _, dup := kv[k]; dup {
			return nil, fmt.Errorf("key %q twice", k)
		}
		if strings.HasPrefix(v, `"`) {
			q, err := strconv.QuotedPrefix(v)
			if err != nil {
				return nil, fmt.Errorf("value of %q: %w", k, err)
			}
			kv[k], _ = strconv.Unquote(q)
			rest = v[len(q):]
			if rest != "" && rest[0] != ' ' {
				return nil, fmt.Errorf("no space after the value of %q", k)
			}
			rest = strings.TrimPrefix(rest, " ")
		} else {
			kv[k], rest, _ = strings.Cut(v, " ")
		}
		keys = append(keys, k)
	}
	if len(keys) < 3 || !slices.Equal(keys[:3], []string{"time", "level", "msg"}) {
		return nil, fmt.Errorf("keys %q do not begin with time, level, msg", keys)
	}
	if _, err := time.Parse(time.RFC3339Nano, kv["time"]); err != nil {
		return nil, fmt.Errorf("time: %w", err)
	}
	if !slices.Contains([]string{"DEBUG", "INFO", "WARN", "ERROR"}, kv["level"]) {
		return nil, fmt.Errorf("level %q", kv["level"])
	}
	return kv, nil
}

// TestOneLogFormat: gompirun, its daemons and their ranks log into one
// stream in one format, key=value; a rank's lines name the rank and its
// node, a daemon's its node. heat is checkpointed with the launch's and
// the ranks' INC stack verbose, so each kind of process logs.
func TestOneLogFormat(t *testing.T) {
	j := start(t, append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes), "-am", "ft-enable-cr",
		"--mca", "snapc_base_global_snapshot_dir", t.TempDir(), "--mca", "plm_base_verbose", "100",
		"--mca", "inc_base_verbose", "100"}, heatArgs()...)...)
	computing(j, 3)
	if code, out, errs := tool(t, "gompi-checkpoint", pidArg(j)); code != 0 {
		t.Fatalf("gompi-checkpoint: status %d\n%s%s\ngompirun:\n%s", code, out, errs, j.errText())
	}
	if code, _, errs := j.wait(); code != 0 {
		t.Fatalf("heat: status %d\n%s", code, errs)
	}
	roles := map[string]int{}
	for _, line := range strings.Split(j.errText(), "\n") {
		if stdLogLine.MatchString(line) {
			t.Errorf("a line in the standard library's log format: %q", line)
			continue
		}
		if !strings.HasPrefix(line, "time=") && !strings.Contains(line, " level=") {
			continue // not a log record (gompirun's messages, the program's output)
		}
		kv, err := parseLogLine(line)
		if err != nil {
			t.Errorf("%v: %q", err, line)
			continue
		}
		role := kv["role"]
		roles[role]++
		switch {
		case role == "app" && (kv["rank"] == "" || !slices.Contains([]string{"n1", "n2"}, kv["node"])):
			t.Errorf("a rank's line without its rank and node: %q", line)
		case role == "daemon" && !slices.Contains([]string{"n1", "n2"}, kv["node"]):
			t.Errorf("a daemon's line without its node: %q", line)
		case role == "":
			t.Errorf("a line that names no role: %q", line)
		}
		if _, err := strconv.Atoi(kv["rank"]); role == "app" && err != nil {
			t.Errorf("rank %q: %q", kv["rank"], line)
		}
	}
	for _, r := range []string{"hnp", "daemon", "app"} {
		if roles[r] == 0 {
			t.Errorf("no log line of role %s (lines by role: %v):\n%s", r, roles, j.errText())
		}
	}
}
