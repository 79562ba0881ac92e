package restart

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"gompi/boot"
	"gompi/frameworks/filem/filemtest"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// A reference on an sftp server is read through filem=sftp, inferred from
// its URL; a remote reference written through boot's MetaStore is recorded
// in the user's index, from which gompi-restart NAME finds it and the
// settings that reach it, and no credential is recorded.
func TestRemoteReference(t *testing.T) {
	s := filemtest.StartSSHD(t)
	isolate(t)
	ref := reference(t) // the server shares this machine's file system
	fakeGompirun(t, ref)
	t.Chdir(t.TempDir())
	url := fmt.Sprintf("sftp://root@127.0.0.1:%d%s/%s", s.Port, ref.Dir, ref.Name)
	reach := []string{"--mca", "filem_sftp_known_hosts", s.KnownHosts, "--mca", "filem_sftp_identity", s.UserKey}

	// The URL alone chooses sftp: no --mca filem.
	code, out, errs := run(t, ref, append(reach, "-i", url)...)
	if code != 0 || !strings.Contains(out, "Job          : 1a2b3c4d") || !strings.Contains(out, "Checked      : snapshot metadata only") {
		t.Fatalf("-i %s: status %d\n%s%s", url, code, out, errs)
	}
	// An explicit parameter the URL contradicts is refused, naming both.
	code, _, errs = run(t, ref, append(reach, "--mca", "filem_sftp_port", "2", "-i", url)...)
	if code != 1 || !strings.Contains(errs, fmt.Sprintf("names port %d, but filem_sftp_port = 2", s.Port)) {
		t.Errorf("port conflict: status %d: %s", code, errs)
	}
	// A tool that writes the reference (as gompirun's coordinator does)
	// records it.
	write(t, ref, url, reach)
	index, err := snapshot.IndexPath()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(s.UserKey)
	if !strings.Contains(string(b), "filem=sftp\tfilem_sftp_known_hosts="+s.KnownHosts+"\tfilem_sftp_identity="+s.UserKey) ||
		strings.Contains(string(b), "PRIVATE KEY") || strings.Contains(string(b), strings.TrimSpace(string(key))) {
		t.Errorf("index:\n%s", b)
	}
	// By name alone, with no parameter: found in the index, reached with
	// what it keeps.
	code, out, errs = run(t, ref, "-i", "--json", ref.Name)
	var in Info
	if err := json.Unmarshal([]byte(out), &in); code != 0 || err != nil || in.Restart != 2 || !strings.HasPrefix(in.Dir, "sftp://root@127.0.0.1:") {
		t.Fatalf("-i %s: status %d %v\n%s%s", ref.Name, code, err, out, errs)
	}
	// gompirun is given what reached it, which the job did not store.
	code, out, errs = run(t, ref, "--showme", ref.Name)
	want := fmt.Sprintf("--mca filem sftp --mca filem_sftp_known_hosts %s --mca filem_sftp_identity %s --wdir /work -x OMP_NUM_THREADS=1 --restart-ref %s --restart-seq 2",
		s.KnownHosts, s.UserKey, strings.ReplaceAll(url, ref.Dir, "$DIR"))
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("--showme %s: status %d\n%s%s", ref.Name, code, out, errs)
	}
}

// write rewrites ref's metadata through boot's MetaStore of its URL.
func write(t *testing.T, ref snapshot.Ref, url string, reach []string) {
	t.Helper()
	var pairs []string
	for i := 1; i < len(reach); i += 3 {
		pairs = append(pairs, reach[i]+"="+reach[i+1])
	}
	ctx := context.Background()
	p, err := boot.Load(ctx, boot.Options{Role: mca.RoleTool, Sources: mca.SourceOptions{MCA: pairs}, LogOutput: io.Discard, NoPlugins: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	remote, err := snapshot.ParseRef(url, "")
	if err != nil {
		t.Fatal(err)
	}
	g, err := snapshot.ReadGlobal(ref)
	if err != nil {
		t.Fatal(err)
	}
	ms, closeMeta, err := p.MetaStore(ctx, remote)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMeta()
	if err := ms.WriteGlobal(ctx, remote, g); err != nil {
		t.Fatal(err)
	}
}
