package e2e

import (
	"testing"
)

// TestSMExcluded runs the same traffic job with the default transports
// and with sm excluded (--mca btl ^sm): both compute the same digest;
// peers of one node talk over sm in the first and over uds in the second,
// peers of two nodes over tcp in both.
func TestSMExcluded(t *testing.T) {
	r := trafficRun{seed: 23, rounds: 60}
	nodes := []string{"n1", "n1", "n2", "n2"}
	var digest string
	for _, c := range []struct {
		args  []string
		local string
	}{{nil, "sm"}, {[]string{"--mca", "btl", "^sm"}, "uds"}} {
		args := append(append([]string{"-np", "4", "--hostfile", hostfile(t, twoNodes)}, c.args...), r.args()...)
		code, out, errs := start(t, args...).wait()
		d := trafficDigest(out)
		if code != 0 || d == "" {
			t.Fatalf("traffic %v: status %d, output %q\n%s", c.args, code, out, errs)
		}
		if digest != "" && d != digest {
			t.Errorf("traffic %v: digest %s, want %s as with the default transports", c.args, d, digest)
		}
		digest = d
		checkTransportsOver(t, out, nodes, c.local)
	}
}
