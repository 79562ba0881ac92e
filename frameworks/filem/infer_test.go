package filem_test

import (
	"strings"
	"testing"

	filemsftp "gompi/components/filem/sftp"
	"gompi/frameworks"
	"gompi/frameworks/filem"
	"gompi/mca"
)

// The names Infer and the snapshot index set are the sftp component's.
func TestSFTPParamNames(t *testing.T) {
	params := mca.NewParams()
	frameworks.New(params).FileM.Register(filemsftp.New())
	for _, name := range []string{filem.ParamSFTPUser, filem.ParamSFTPPort, filem.ParamSFTPKnownHosts, filem.ParamSFTPIdentity} {
		if _, ok := params.Lookup(name); !ok {
			t.Errorf("the sftp component registers no %s", name)
		}
	}
	if filemsftp.Name != filem.SFTP || filemsftp.ParamUser != filem.ParamSFTPUser || filemsftp.ParamPort != filem.ParamSFTPPort ||
		filemsftp.ParamKnownHosts != filem.ParamSFTPKnownHosts || filemsftp.ParamIdentity != filem.ParamSFTPIdentity {
		t.Error("filem's sftp names differ from the component's")
	}
}

func TestInfer(t *testing.T) {
	params := mca.NewParams()
	frameworks.New(params).FileM.Register(filemsftp.New())
	cmd := func(name, value string) mca.Setting {
		return mca.Setting{Name: name, Value: value, Origin: mca.Origin{Source: mca.SourceCommandLine, Where: "--mca"}}
	}
	tests := []struct {
		name    string
		loc     string
		set     []mca.Setting
		want    string // the filem value inferred ("" = none)
		wantErr string
	}{
		{name: "local path", loc: "/scratch/ckpt"},
		{name: "file URL", loc: "file:///scratch/ckpt"},
		{name: "sftp URL", loc: "sftp://alice@node7:2222/scratch", want: "sftp"},
		{name: "scp style is the same place", loc: "node7:/scratch", want: "sftp"},
		{name: "explicit filem wins", loc: "sftp://node7/scratch", set: []mca.Setting{cmd("filem", "rsh")}},
		{name: "explicit sftp", loc: "sftp://node7/scratch", set: []mca.Setting{cmd("filem", "sftp")}},
		{name: "explicit port where the URL names none", loc: "sftp://node7/scratch", set: []mca.Setting{cmd(filem.ParamSFTPPort, "2200")}, want: "sftp"},
		{name: "same port", loc: "sftp://node7:2200/scratch", set: []mca.Setting{cmd(filem.ParamSFTPPort, "2200")}, want: "sftp"},
		{name: "port conflict", loc: "sftp://node7:2222/scratch", set: []mca.Setting{cmd(filem.ParamSFTPPort, "2200")},
			wantErr: "names port 2222, but filem_sftp_port = 2200 (from command line (--mca))"},
		{name: "user conflict", loc: "sftp://alice@node7/scratch", set: []mca.Setting{cmd(filem.ParamSFTPUser, "bob")},
			wantErr: "names user alice, but filem_sftp_user = bob"},
		{name: "user conflict under an explicit sftp", loc: "sftp://alice@node7/scratch", set: []mca.Setting{cmd("filem", "sftp"), cmd(filem.ParamSFTPUser, "bob")},
			wantErr: "names user alice"},
		{name: "no conflict under rsh", loc: "sftp://alice@node7/scratch", set: []mca.Setting{cmd("filem", "rsh"), cmd(filem.ParamSFTPUser, "bob")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals, err := params.ResolveSettings(tt.set)
			if err != nil {
				t.Fatal(err)
			}
			l, err := filem.ParseLocation(tt.loc)
			if err != nil {
				t.Fatal(err)
			}
			got, err := filem.Infer(l, vals)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v; want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("inferred %v, want nothing", got)
			case tt.want != "" && (len(got) != 1 || got[0].Name != filem.Name || got[0].Value != tt.want || got[0].Origin.Source != mca.SourceInferred ||
				!strings.HasPrefix(got[0].Origin.Where, "from ")):
				t.Errorf("inferred %v, want filem = %s, inferred", got, tt.want)
			}
		})
	}
}
