package mca

import "fmt"

// The two "skip unless" rules several components share, so each says it
// in one line and gompi-info shows the same reason for the same rule.

// ParamCREnabled turns checkpoint/restart on (-am ft-enable-cr sets it).
const ParamCREnabled = "ft_cr_enabled"

// SkipUnlessCR is for a component that applies when checkpoint/restart
// is on or when its framework's selection names it (sstore central and
// stage, snapc full): nil when it applies, else an error wrapping ErrSkip.
func (q Query) SkipUnlessCR(framework, name string) error {
	if q.Values.Bool(ParamCREnabled) || Names(q.Values, framework, name) {
		return nil
	}
	return fmt.Errorf("%s/%s: checkpoint/restart is off (%s=0): %w", framework, name, ParamCREnabled, ErrSkip)
}

// SkipUnlessRankCR is for a component that works only inside the ranks
// of a job with checkpoint/restart on (crs self, crcp bkmrk); why says why
// only a rank can use it. It returns nil when it applies, else an error
// wrapping ErrSkip.
func (q Query) SkipUnlessRankCR(framework, name, why string) error {
	if q.Role != RoleApp {
		return fmt.Errorf("%s/%s: %s; this is a %v process: %w", framework, name, why, q.Role, ErrSkip)
	}
	if !q.Values.Bool(ParamCREnabled) {
		return fmt.Errorf("%s/%s: checkpoint/restart is off (%s = 0; run with -am ft-enable-cr): %w", framework, name, ParamCREnabled, ErrSkip)
	}
	return nil
}

// SkipUnlessAsked is for a policy that applies only when asked for: by
// name in its framework's selection or with its enable parameter (errmgr
// sustain, autor and crmig). selection is a selection value naming it,
// shown as the way to ask. It returns nil when asked, else an error
// wrapping ErrSkip; for a policy on by default (its enable parameter
// defaults to true) the error says it was turned off.
func (q Query) SkipUnlessAsked(framework, name, enable, selection string) error {
	if q.Values.Bool(enable) || Names(q.Values, framework, name) {
		return nil
	}
	if q.Values.params != nil {
		if p, ok := q.Values.params.Lookup(enable); ok {
			if on, _ := ParseBool(p.Default); on {
				return fmt.Errorf("%s/%s: turned off (%s=0; name it, --mca %s %s, or set %s=1): %w",
					framework, name, enable, framework, selection, enable, ErrSkip)
			}
		}
	}
	return fmt.Errorf("%s/%s: not asked for (name it, --mca %s %s, or set %s=1): %w",
		framework, name, framework, selection, enable, ErrSkip)
}
