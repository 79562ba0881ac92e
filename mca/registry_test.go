package mca

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

type fakeModule struct{ name string }

type fakeComp struct {
	name, origin string
	prio         int
	skip, fail   bool
	params       []ParamSpec
}

func (c fakeComp) Info() ComponentInfo {
	o := c.origin
	if o == "" {
		o = "built-in"
	}
	return ComponentInfo{Framework: "fake", Name: c.name, Priority: c.prio, Origin: o, Params: c.params}
}

func (c fakeComp) Query(ctx context.Context, q Query) (*fakeModule, int, error) {
	switch {
	case c.skip:
		return nil, 0, fmt.Errorf("%s: no device: %w", c.name, ErrSkip)
	case c.fail:
		return nil, 0, fmt.Errorf("%s: broken", c.name)
	}
	if q.Note != nil {
		q.Note(c.name + " found what it needs")
	}
	return &fakeModule{c.name}, q.Priority, nil
}

func fakeFramework(t *testing.T, stack bool, comps ...fakeComp) (*Framework[*fakeModule], *Params) {
	t.Helper()
	p := NewParams()
	var opts []FrameworkOption
	if stack {
		opts = append(opts, Stacked())
	}
	f := NewFramework[*fakeModule](p, "fake", "a framework for tests", opts...)
	for _, c := range comps {
		f.Register(c)
	}
	return f, p
}

func settings(kv ...string) []Setting {
	var out []Setting
	for i := 0; i < len(kv); i += 2 {
		out = append(out, Setting{Name: kv[i], Value: kv[i+1], Origin: Origin{Source: SourceCommandLine, Where: "--mca"}})
	}
	return out
}

func TestSelect(t *testing.T) {
	comps := []fakeComp{
		{name: "alpha", prio: 10},
		{name: "beta", prio: 30},
		{name: "gamma", prio: 20},
		{name: "skipper", prio: 99, skip: true},
		{name: "broken", prio: 98, fail: true},
		{name: "plug", prio: 30, origin: "/p/gompi-plugin-x"},
	}
	tests := []struct {
		name    string
		set     []string
		stack   bool
		want    string // names, best first
		wantErr string
		is      error
	}{
		{name: "highest wins, built-in beats plugin on tie", want: "beta"},
		{name: "include list", set: []string{"fake", "alpha,gamma"}, want: "gamma"},
		{name: "exclude list", set: []string{"fake", "^beta,plug"}, want: "gamma"},
		{name: "double caret tolerated", set: []string{"fake", "^^beta,plug,gamma"}, want: "alpha"},
		{name: "priority parameter", set: []string{"fake_alpha_priority", "100"}, want: "alpha"},
		{name: "stack keeps all in order", stack: true, want: "beta,plug,gamma,alpha"},
		{name: "unknown include", set: []string{"fake", "alpha,bogus"}, wantErr: `unknown component "bogus"; known fake components: alpha, beta, broken, gamma, plug, skipper`, is: ErrUnknownComponent},
		{name: "typo suggests", set: []string{"fake", "gama"}, wantErr: "did you mean gamma?", is: ErrUnknownComponent},
		{name: "caret inside", set: []string{"fake", "alpha,^beta"}, wantErr: "'^' may only start the list"},
		{name: "empty name", set: []string{"fake", "alpha,,beta"}, wantErr: "empty component name"},
		{name: "nothing left", set: []string{"fake", "skipper,broken"}, wantErr: "no component available", is: ErrNoComponent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, p := fakeFramework(t, tt.stack, comps...)
			vals, err := p.ResolveSettings(settings(tt.set...))
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Select(context.Background(), vals, RoleApp, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if tt.is != nil && !errors.Is(err, tt.is) {
					t.Fatalf("err %v is not %v", err, tt.is)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range got {
				names = append(names, c.Module.name)
			}
			if strings.Join(names, ",") != tt.want {
				t.Errorf("selected %v, want %s", names, tt.want)
			}
		})
	}
}

func TestProbe(t *testing.T) {
	f, p := fakeFramework(t, false, fakeComp{name: "a", prio: 1}, fakeComp{name: "b", prio: 2},
		fakeComp{name: "s", skip: true}, fakeComp{name: "x", fail: true})
	vals, _ := p.ResolveSettings(settings("fake", "^a", "mca_base_component_show_load_errors", "0"))
	probes, err := f.Probe(context.Background(), vals, RoleTool)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Probe{}
	for _, pr := range probes {
		got[pr.Info.Name] = pr
	}
	if !got["a"].Excluded || got["a"].Selected || !got["b"].Selected || got["s"].Skipped == "" || got["x"].Failed == "" {
		t.Errorf("probes = %+v", probes)
	}
	if !strings.Contains(got["s"].Skipped, "no device") {
		t.Errorf("skip reason lost: %q", got["s"].Skipped)
	}
	if got["b"].Note != "b found what it needs" || got["s"].Note != "" {
		t.Errorf("notes %q (b), %q (s); want b's note and none for the skipped s", got["b"].Note, got["s"].Note)
	}
}

func TestRegisterRules(t *testing.T) {
	mustPanic := func(name string, fn func()) {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			fn()
		})
	}
	mustPanic("duplicate", func() { fakeFramework(t, false, fakeComp{name: "a"}, fakeComp{name: "a"}) })
	mustPanic("nil", func() {
		f, _ := fakeFramework(t, false)
		f.Register(nil)
	})
	mustPanic("param outside namespace", func() {
		fakeFramework(t, false, fakeComp{name: "a", params: []ParamSpec{{Name: "other_x"}}})
	})
	f, _ := fakeFramework(t, false, fakeComp{name: "zeta"}, fakeComp{name: "alpha"}, fakeComp{name: "mid"})
	if got := strings.Join(f.Names(), ","); got != "alpha,mid,zeta" {
		t.Errorf("Names = %s", got)
	}
	// A plugin with a taken name is an error, not a panic.
	if err := f.Add(fakeComp{name: "alpha", origin: "/x/gompi-plugin-y"}); err == nil || !strings.Contains(err.Error(), "registered twice") {
		t.Errorf("Add duplicate: %v", err)
	}
	if err := f.Add(fakeComp{name: "Bad"}); err == nil {
		t.Error("Add accepted a bad name")
	}
	f2, p := fakeFramework(t, false, fakeComp{name: "c", params: []ParamSpec{{Name: "fake_c_depth", Type: Int, Default: "3"}}})
	_ = f2
	vals, err := p.ResolveSettings(nil)
	if err != nil || vals.Int("fake_c_depth") != 3 || vals.Int("fake_c_priority") != 0 {
		t.Errorf("component params not registered: %v", err)
	}
}

func TestParseSelector(t *testing.T) {
	for in, want := range map[string]string{"": "incl[]", "a,b": "incl[a b]", "^a": "excl[a]", " ^ a , b ": "excl[a b]"} {
		s, err := ParseSelector(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		got := fmt.Sprintf("incl%v", s.Names)
		if s.Exclude {
			got = fmt.Sprintf("excl%v", s.Names)
		}
		if got != want {
			t.Errorf("ParseSelector(%q) = %s, want %s", in, got, want)
		}
	}
}

func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"", "a,b", "^a,b", "a,^b", "^^x", ",", "a,,b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSelector(in)
		if err != nil {
			return
		}
		for _, n := range s.Names {
			if n == "" || strings.ContainsAny(n, ",^") || n != strings.TrimSpace(n) {
				t.Fatalf("bad name %q from %q", n, in)
			}
		}
	})
}

func TestNames(t *testing.T) {
	_, p := fakeFramework(t, false, fakeComp{name: "a"}, fakeComp{name: "b"})
	tests := []struct {
		sel  string
		want bool
	}{
		{"", false}, {"b", false}, {"a", true}, {"b,a", true}, {"^a", false}, {"^b", false},
	}
	for _, tt := range tests {
		vals, err := p.ResolveSettings(settings("fake", tt.sel))
		if err != nil {
			t.Fatal(err)
		}
		if got := Names(vals, "fake", "a"); got != tt.want {
			t.Errorf("fake = %q: Names(a) = %v, want %v", tt.sel, got, tt.want)
		}
	}
}
