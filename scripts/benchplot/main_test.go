package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTableAndPlot(t *testing.T) {
	rows := strings.Join([]string{
		`{"series":"a","test":"latency","size":8,"latency_us":3}`,
		`{"series":"a","test":"latency","size":8,"latency_us":1}`,
		`{"series":"a","test":"latency","size":8,"latency_us":2}`,
		`{"series":"b","test":"latency","size":8,"latency_us":4}`,
		`{"series":"b","test":"latency","size":8,"latency_us":6}`,
		`{"series":"a","test":"bandwidth","size":1048576,"mb_per_s":900}`,
		`{"series":"b","test":"allreduce","size":8,"latency_us":7}`,
		`{"series":"b","test":"netpipe","size":1024,"latency_us":9,"mb_per_s":300}`,
	}, "\n")
	dir := t.TempDir()
	in := filepath.Join(dir, "rows.jsonl")
	if err := os.WriteFile(in, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{"plot.svg", "plot.png"} {
		var table bytes.Buffer
		if err := run(in, filepath.Join(dir, out), "t", &table); err != nil {
			t.Fatal(err)
		}
		// Medians: a's of 1, 2, 3 is 2; b's of 4 and 6 is 5.
		for _, want := range []string{"8B             2.00 ( 3)      5.00 ( 2)", "1MiB         900.00 ( 1)              -", "8B                     -      7.00 ( 1)",
			"# NetPIPE NPmpi throughput (MB/s", "1KiB                   -    300.00 ( 1)"} {
			if !strings.Contains(table.String(), want) {
				t.Errorf("table lacks %q:\n%s", want, table.String())
			}
		}
		if st, err := os.Stat(filepath.Join(dir, out)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", out, err)
		}
	}
	if err := run(in, filepath.Join(dir, "plot.bogus"), "t", &bytes.Buffer{}); err == nil {
		t.Error("unknown plot format accepted")
	}
	if err := os.WriteFile(in, []byte(`{"series":"a","test":"latency","size":8}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, filepath.Join(dir, "x.svg"), "t", &bytes.Buffer{}); err == nil {
		t.Error("a row without a figure accepted")
	}
}
