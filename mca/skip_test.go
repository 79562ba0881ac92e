package mca

import (
	"errors"
	"testing"
)

func TestSkipRules(t *testing.T) {
	p := NewParams()
	p.Register("fw", ParamSpec{Name: "fw", Type: String}, ParamSpec{Name: "fw_x_enable", Type: Bool, Default: "0"})
	resolve := func(settings ...Setting) Query {
		t.Helper()
		vals, err := p.ResolveSettings(settings)
		if err != nil {
			t.Fatal(err)
		}
		return Query{Values: vals}
	}
	set := func(name, value string) Setting { return Setting{Name: name, Value: value} }

	off := resolve()
	err := off.SkipUnlessCR("fw", "x")
	if !errors.Is(err, ErrSkip) || err.Error() != "fw/x: checkpoint/restart is off (ft_cr_enabled=0): "+ErrSkip.Error() {
		t.Errorf("C/R off: %v", err)
	}
	err = off.SkipUnlessAsked("fw", "x", "fw_x_enable", "x,default")
	if !errors.Is(err, ErrSkip) || err.Error() != "fw/x: not asked for (name it, --mca fw x,default, or set fw_x_enable=1): "+ErrSkip.Error() {
		t.Errorf("not asked: %v", err)
	}
	for _, q := range []Query{resolve(set("ft_cr_enabled", "1")), resolve(set("fw", "x,y"))} {
		if err := q.SkipUnlessCR("fw", "x"); err != nil {
			t.Errorf("C/R on or named: %v", err)
		}
	}
	for _, q := range []Query{resolve(set("fw_x_enable", "1")), resolve(set("fw", "x"))} {
		if err := q.SkipUnlessAsked("fw", "x", "fw_x_enable", "x"); err != nil {
			t.Errorf("asked: %v", err)
		}
	}
	rankCR := resolve(set("ft_cr_enabled", "1"))
	rankCR.Role = RoleApp
	if err := rankCR.SkipUnlessRankCR("fw", "x", "it runs in ranks"); err != nil {
		t.Errorf("a rank with C/R on: %v", err)
	}
	rankCR.Role = RoleDaemon
	if err := rankCR.SkipUnlessRankCR("fw", "x", "it runs in ranks"); !errors.Is(err, ErrSkip) || err.Error() != "fw/x: it runs in ranks; this is a daemon process: "+ErrSkip.Error() {
		t.Errorf("a daemon: %v", err)
	}
	off.Role = RoleApp
	if err := off.SkipUnlessRankCR("fw", "x", "it runs in ranks"); !errors.Is(err, ErrSkip) || err.Error() != "fw/x: checkpoint/restart is off (ft_cr_enabled = 0; run with -am ft-enable-cr): "+ErrSkip.Error() {
		t.Errorf("a rank with C/R off: %v", err)
	}
	p.Register("fw", ParamSpec{Name: "fw_y_enable", Type: Bool, Default: "1"})
	err = resolve(set("fw_y_enable", "0")).SkipUnlessAsked("fw", "y", "fw_y_enable", "y,default")
	if !errors.Is(err, ErrSkip) || err.Error() != "fw/y: turned off (fw_y_enable=0; name it, --mca fw y,default, or set fw_y_enable=1): "+ErrSkip.Error() {
		t.Errorf("a policy on by default, turned off: %v", err)
	}
	if err := resolve().SkipUnlessAsked("fw", "y", "fw_y_enable", "y"); err != nil {
		t.Errorf("a policy on by default: %v", err)
	}
	if err := resolve(set("fw", "^x")).SkipUnlessAsked("fw", "x", "fw_x_enable", "x"); !errors.Is(err, ErrSkip) {
		t.Errorf("an exclusion asks for nothing: %v", err)
	}
}
