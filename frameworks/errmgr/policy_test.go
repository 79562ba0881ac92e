package errmgr

import (
	"errors"
	"testing"

	"gompi/mca"
)

func TestSkipUnlessAsked(t *testing.T) {
	p := mca.NewParams()
	p.Register("test", mca.ParamSpec{Name: Name, Type: mca.String},
		mca.ParamSpec{Name: "errmgr_x_enable", Type: mca.Bool, Default: "0"})
	tests := []struct {
		settings map[string]string
		uses     string
		want     string // "" = applies
	}{
		{nil, "", "errmgr/x: not asked for (name it, --mca errmgr x,default, or set errmgr_x_enable=1)"},
		{map[string]string{"errmgr_x_enable": "1"}, "", ""},
		{map[string]string{Name: "x,default"}, "restarts things", "errmgr/x: it restarts things, and checkpoint/restart is off: run with -am ft-enable-cr"},
		{map[string]string{Name: "x,default", mca.ParamCREnabled: "1"}, "restarts things", ""},
		{map[string]string{mca.ParamCREnabled: "1"}, "restarts things", "errmgr/x: not asked for"},
	}
	for _, tt := range tests {
		var s []mca.Setting
		for k, v := range tt.settings {
			s = append(s, mca.Setting{Name: k, Value: v})
		}
		vals, err := p.ResolveSettings(s)
		if err != nil {
			t.Fatal(err)
		}
		err = SkipUnlessAsked(mca.Query{Values: vals}, "x", "errmgr_x_enable", "x,default", tt.uses)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: %v", tt.settings, err)
		case tt.want != "" && (!errors.Is(err, mca.ErrSkip) || len(err.Error()) < len(tt.want) || err.Error()[:len(tt.want)] != tt.want):
			t.Errorf("%v: got %v, want %q…", tt.settings, err, tt.want)
		}
	}
}
