package errmgr

import (
	"fmt"

	"gompi/mca"
)

// SkipUnlessAsked is the rule the optional policies (sustain, autor,
// crmig) check first in their Query: the policy applies only when asked
// for (mca.Query.SkipUnlessAsked: named in the errmgr selection, or its
// enable parameter on; selection is the value shown as the way to name
// it) and, for a policy that works through checkpoints, only when
// checkpoint/restart is on. uses says what such a policy does with
// checkpoints ("restarts jobs from their checkpoints"), in the reason it
// gives; empty for a policy that needs no checkpoints. It returns nil when
// the policy applies, else an error wrapping mca.ErrSkip.
func SkipUnlessAsked(q mca.Query, name, enable, selection, uses string) error {
	if err := q.SkipUnlessAsked(Name, name, enable, selection); err != nil {
		return err
	}
	if uses != "" && !q.Values.Bool(mca.ParamCREnabled) {
		return fmt.Errorf("%s/%s: it %s, and checkpoint/restart is off: run with -am ft-enable-cr: %w", Name, name, uses, mca.ErrSkip)
	}
	return nil
}
