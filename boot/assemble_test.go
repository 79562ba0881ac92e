package boot

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"gompi/frameworks/crs"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

func loadWith(t *testing.T, role mca.Role, mcaArgs ...string) *Process {
	t.Helper()
	home := isolate(t)
	p, err := Load(t.Context(), Options{Role: role, NoPlugins: true, Sources: mca.SourceOptions{Home: home, MCA: mcaArgs}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// The job's CRS is chosen once, by gompirun, as a rank would choose it, and
// travels in the settings its daemons and ranks resolve.
func TestHNPChoosesTheJobsCRS(t *testing.T) {
	for _, tt := range []struct {
		args []string
		crs  string
	}{
		{[]string{"ft_cr_enabled=1"}, "self"},
		{nil, "none"},
	} {
		p := loadWith(t, mca.RoleHNP, tt.args...)
		h, err := AssembleHNP(t.Context(), p, "")
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if h.CRS != tt.crs || h.PLM.Info.Name != "local" || h.SnapC.Module == nil || h.ErrMgr == nil {
			t.Fatalf("%v: assembled crs %q, plm %q, snapc %v", tt.args, h.CRS, h.PLM.Info.Name, h.SnapC.Module)
		}
		rank, err := Load(t.Context(), Options{Role: mca.RoleApp, NoPlugins: true, Settings: h.JobSettings(p.Values)})
		if err != nil {
			t.Fatal(err)
		}
		defer rank.Close()
		vals := rank.Values
		if got := vals.String(crs.Name); got != tt.crs || !strings.Contains(vals.Get(crs.Name).Origin.String(), "gompirun") {
			t.Fatalf("%v: the ranks' crs = %q (from %s), want %q chosen by gompirun", tt.args, got, vals.Get(crs.Name).Origin, tt.crs)
		}
		a, err := AssembleApp(t.Context(), AppInput{Set: rank.Frameworks, Values: vals, Size: 1, Log: slog.DiscardHandler})
		if err != nil || a.CRSErr != nil || a.CRS.Info.Name != tt.crs {
			t.Fatalf("%v: a rank assembled crs %q (%v, %v)", tt.args, a.CRS.Info.Name, a.CRSErr, err)
		}
		a.Close()
	}
}

// A CRS the user named that cannot be used refuses the job, saying why
// and where to look; with nothing named, a job with C/R off goes on.
func TestHNPRefusesANamedCRSItCannotUse(t *testing.T) {
	p := loadWith(t, mca.RoleHNP, "ft_cr_enabled=1", "crs=^self,none")
	if _, err := AssembleHNP(t.Context(), p, ""); err == nil || !strings.Contains(err.Error(), "choose the job's CRS") ||
		!strings.Contains(err.Error(), "gompi-info --mca crs ^self,none says more") {
		t.Fatalf("crs excluding every component: %v", err)
	}
}

// gompid provisions a stable storage that takes a host with its node and a
// FileM, and closes both with its set.
func TestDaemonProvisionsSStore(t *testing.T) {
	p := loadWith(t, mca.RoleDaemon, "sstore=stage", "sstore_stage_local_snapshot_dir="+t.TempDir())
	d, err := AssembleDaemon(t.Context(), p, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if d.FileM == nil || d.SStore.Info.Name != "stage" {
		t.Fatalf("assembled sstore %s, filem %v", d.SStore.Info.Name, d.FileM)
	}
	ref := snapshot.Ref{Dir: t.TempDir(), Name: snapshot.RefName("1")}
	dir, err := d.SStore.Module.LocalDir(t.Context(), ref, 0, 0)
	if err != nil || !strings.Contains(dir, "/n1/") {
		t.Fatalf("LocalDir of the provisioned module = %s, %v", dir, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	p = loadWith(t, mca.RoleDaemon, "sstore=central")
	if d, err = AssembleDaemon(t.Context(), p, "n1"); err != nil || d.FileM != nil {
		t.Fatalf("central: filem %v, %v", d.FileM, err)
	}
	d.Close()
}

// A rank of a job of several ranks selects its transports and keeps
// selection errors of inc and crs for package cr.
func TestAppAssembly(t *testing.T) {
	p := loadWith(t, mca.RoleApp, "ft_cr_enabled=1", "crcp=bkmrk")
	a, err := AssembleApp(t.Context(), AppInput{Set: p.Frameworks, Values: p.Values, Size: 2, Log: slog.DiscardHandler})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.BTL) == 0 || a.CRCP == nil || a.CRCP.Info.Name != "bkmrk" || a.INCErr != nil || a.CRS.Info.Name != "self" {
		t.Fatalf("assembled btl %d, crcp %v, inc %v, crs %s", len(a.BTL), a.CRCP, a.INCErr, a.CRS.Info.Name)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	alone, err := AssembleApp(t.Context(), AppInput{Size: 1})
	if err != nil || alone.CRSErr == nil || alone.INCErr == nil {
		t.Fatalf("a rank without registries: %v, %v, %v", err, alone.CRSErr, alone.INCErr)
	}
	if _, err := AssembleApp(t.Context(), AppInput{Size: 2}); err == nil {
		t.Fatal("a rank of two without a btl framework started")
	}
}

// Each Assemble function selects what Roles lists for its role, in order
// (the recorder panics otherwise): gompi-info --role prints that table.
func TestRolesTableMatchesAssembly(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatal(r)
		}
	}()
	ctx := context.Background()
	h, err := AssembleHNP(ctx, loadWith(t, mca.RoleHNP), "")
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	d, err := AssembleDaemon(ctx, loadWith(t, mca.RoleDaemon, "sstore=stage"), "n1")
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	p := loadWith(t, mca.RoleApp)
	a, err := AssembleApp(ctx, AppInput{Set: p.Frameworks, Values: p.Values, Size: 2, Log: slog.DiscardHandler})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	r := newRecorder(mca.RoleApp)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the recorder accepted a framework out of the table's order")
			}
		}()
		r.add(crs.Name)
	}()
}
