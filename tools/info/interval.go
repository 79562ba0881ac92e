package info

import (
	"fmt"
	"path/filepath"
	"time"

	"gompi/frameworks/errmgr"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// Interval is the suggested periodic checkpoint interval (Young's
// sqrt(2 * MTBF * C)), shown once errmgr_base_mtbf is set. C is the time
// of the newest committed checkpoint found in the global snapshot folder.
type Interval struct {
	MTBF time.Duration `json:"mtbf_ns"`
	// C is the measured checkpoint time, 0 when none was found.
	C time.Duration `json:"checkpoint_ns,omitempty"`
	// From says which checkpoint C was measured on.
	From      string        `json:"measured_on,omitempty"`
	Suggested time.Duration `json:"suggested_ns,omitempty"`
	// Note says why there is no suggestion.
	Note string `json:"note,omitempty"`
}

// suggestInterval returns the Interval of vals, nil when no MTBF is set.
func suggestInterval(vals *mca.Values) *Interval {
	if vals == nil || !vals.Has(errmgr.ParamMTBF) || vals.Duration(errmgr.ParamMTBF) <= 0 {
		return nil
	}
	iv := &Interval{MTBF: vals.Duration(errmgr.ParamMTBF)}
	dir, err := snapc.GlobalDir(vals)
	if err != nil {
		iv.Note = err.Error()
		return iv
	}
	if dir == snapc.GlobalNone {
		iv.Note = fmt.Sprintf("%s = %s: gompi-info times checkpoints from a global snapshot folder only", snapc.ParamGlobalDir, snapc.GlobalNone)
		return iv
	}
	if (snapshot.Ref{Dir: dir}).IsRemote() {
		iv.Note = fmt.Sprintf("the global snapshot folder %s is remote; gompi-info times checkpoints from a local one only", dir)
		return iv
	}
	refs, _ := filepath.Glob(filepath.Join(dir, snapshot.RefName("*")))
	var newest time.Time
	for _, p := range refs {
		ref := snapshot.Ref{Dir: dir, Name: filepath.Base(p)}
		meta, err := snapshot.ReadGlobal(ref)
		if err != nil {
			continue
		}
		if s, ok := meta.NewestTimed(); ok && s.Finished.After(newest) {
			newest = s.Finished
			iv.C = s.Finished.Sub(s.Started)
			iv.From = fmt.Sprintf("%s sequence %d", ref.Name, s.Seq)
		}
	}
	if iv.C == 0 {
		iv.Note = fmt.Sprintf("no committed checkpoint in %s (%s) to time yet: take one (gompi-checkpoint PID)", dir, snapc.ParamGlobalDir)
		return iv
	}
	iv.Suggested = snapc.SuggestedInterval(iv.MTBF, iv.C)
	return iv
}

// text is the interval as gompi-info's text output shows it.
func (iv *Interval) text() string {
	if iv.Suggested == 0 {
		return fmt.Sprintf("Checkpoint interval: no suggestion for %s = %v: %s", errmgr.ParamMTBF, iv.MTBF, iv.Note)
	}
	return fmt.Sprintf("Checkpoint interval: suggested %s = %v (sqrt(2 x %s %v x checkpoint time %.2fs, measured on %s))",
		snapc.ParamPeriodic, iv.Suggested.Round(time.Second), errmgr.ParamMTBF, iv.MTBF, iv.C.Seconds(), iv.From)
}
