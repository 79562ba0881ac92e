package slurm

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestReadAllocation(t *testing.T) {
	n := func(name string, slots int) Node { return Node{Name: name, Slots: slots} }
	tests := []struct {
		name   string
		env    map[string]string
		want   []Node
		noKill bool
		err    error
		says   string
	}{
		{name: "salloc", env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "2(x3)"},
			want: []Node{n("n1", 2), n("n2", 2), n("n3", 2)}},
		{name: "uneven", env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "a[1-2],b", "SLURM_TASKS_PER_NODE": "2(x2),1", "SALLOC_NO_KILL": "set"},
			want: []Node{n("a1", 2), n("a2", 2), n("b", 1)}, noKill: true},
		{name: "old names", env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_NODELIST": "x", "SLURM_JOB_CPUS_PER_NODE": "4", "SBATCH_NO_KILL": "set"},
			want: []Node{n("x", 4)}, noKill: true},
		{name: "no-kill off", env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "x", "SLURM_TASKS_PER_NODE": "1", "SBATCH_NO_KILL": "off"},
			want: []Node{n("x", 1)}},
		{name: "huge slots are bounded", env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "x", "SLURM_TASKS_PER_NODE": "999999999"},
			want: []Node{n("x", maxSlots)}},
		{name: "outside", env: map[string]string{"SLURM_JOB_NODELIST": "n1"}, err: ErrNotAllocation},
		{name: "no node list", env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_TASKS_PER_NODE": "1"}, err: ErrSyntax, says: "SLURM_JOB_NODELIST"},
		{name: "bad node list", env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-", "SLURM_TASKS_PER_NODE": "1"}, err: ErrSyntax, says: "SLURM_JOB_NODELIST=n[1-"},
		{name: "bad tasks", env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n1", "SLURM_TASKS_PER_NODE": "2(x"}, err: ErrSyntax, says: "SLURM_TASKS_PER_NODE"},
		{name: "counts differ", env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "2(x2)"}, err: ErrSyntax, says: "names 3 nodes but"},
		{name: "twice", env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n1,n1", "SLURM_TASKS_PER_NODE": "1(x2)"}, err: ErrSyntax, says: "n1 twice"},
		{name: "hostile", env: map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[0-99999999]", "SLURM_TASKS_PER_NODE": "1"}, err: ErrTooMany},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ReadAllocation(func(k string) string { return tt.env[k] })
			if tt.err != nil {
				if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.says) {
					t.Fatalf("error %v, want one matching %v and saying %q", err, tt.err, tt.says)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(a.Nodes, tt.want) || a.NoKill != tt.noKill {
				t.Fatalf("got %+v (no-kill %v), %v; want %+v (no-kill %v)", a.Nodes, a.NoKill, err, tt.want, tt.noKill)
			}
			if (a.NoKillWarning() == "") != tt.noKill {
				t.Fatalf("NoKillWarning() = %q with NoKill %v", a.NoKillWarning(), a.NoKill)
			}
		})
	}
}
