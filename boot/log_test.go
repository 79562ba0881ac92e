package boot

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"gompi/mca"
)

// TestLogHandlerAttrs: a rank's records, its library's and its
// frameworks', are in the job's one format and name the rank and node;
// each framework's verbosity still filters its own records.
func TestLogHandlerAttrs(t *testing.T) {
	var buf bytes.Buffer
	p, err := Load(t.Context(), Options{Role: mca.RoleApp, NoPlugins: true, LogOutput: &buf,
		Settings: []mca.Setting{{Name: "btl_base_verbose", Value: "100"}},
		LogAttrs: []slog.Attr{slog.Int("rank", 3), slog.String("node", "n7")}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Log.Warn("hello world", "k", "v w")
	p.FrameworkLogger("btl").Debug("chosen", "btl", "tcp")
	p.FrameworkLogger("crs").Debug("dropped: crs_base_verbose is 0")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^time=\S+ level=WARN msg="hello world" role=app rank=3 node=n7 k="v w"$`),
		regexp.MustCompile(`^time=\S+ level=DEBUG msg=chosen role=app rank=3 node=n7 framework=btl btl=tcp$`),
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d:\n%s\nwant it to match %s", i, lines[i], re)
		}
	}
	// gompid's own logger is built on the same handler.
	buf.Reset()
	slog.New(NewLogHandler(&buf, slog.String("node", "n2"))).Info("up")
	if re := regexp.MustCompile(`^time=\S+ level=INFO msg=up node=n2\n$`); !re.MatchString(buf.String()) {
		t.Errorf("NewLogHandler wrote %q, want it to match %s", buf.String(), re)
	}
}
