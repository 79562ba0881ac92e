package info

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// levelNames are Open MPI's names for the nine parameter levels.
var levelNames = [...]string{"", "user/basic", "user/detail", "user/all", "tuner/basic", "tuner/detail", "tuner/all", "dev/basic", "dev/detail", "dev/all"}

func levelName(l int) string {
	if l >= 1 && l < len(levelNames) {
		return fmt.Sprintf("%d %s", l, levelNames[l])
	}
	return fmt.Sprint(l)
}

// WriteText writes the report for people: a version line, then each
// framework with one line per component (Open MPI's "MCA crs: self (...)"
// style) and, when collected, each parameter with its value, origin,
// level, type and help.
func (r *Report) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "gompi version %s\n", r.Version)
	if len(r.AMCASets) > 0 {
		fmt.Fprintf(b, "AMCA sets: %s (leftmost wins)\n", strings.Join(r.AMCASets, ", "))
	}
	fmt.Fprintf(b, "Selection probed as: %s\n", r.Role)
	if r.Interval != nil {
		fmt.Fprintln(b, r.Interval.text())
	}
	if r.Protection != "" {
		fmt.Fprintln(b, r.Protection)
	}
	for _, f := range r.Frameworks {
		fmt.Fprintf(b, "\nMCA %s: %s\n", f.Name, f.Description)
		fmt.Fprintf(b, "  selection: %s = %q (%s)\n", f.Name, f.Selection.Value, f.Selection.Origin)
		if wr := f.Wiring; wr != nil {
			fmt.Fprintf(b, "  wired in %s: %s\n", r.Role, wr.text())
		}
		if len(f.Components) == 0 {
			fmt.Fprintf(b, "  (no components)\n")
		}
		for _, c := range f.Components {
			fmt.Fprintf(b, "  MCA %s: %s (%s, priority %d) [%s", f.Name, c.Name, c.Origin, c.Priority, c.Status)
			switch {
			case c.Reason != "":
				fmt.Fprintf(b, ": %s", oneLine(c.Reason))
			case c.Note != "":
				fmt.Fprintf(b, ": %s", oneLine(c.Note))
			}
			fmt.Fprintf(b, "]\n")
		}
		for _, p := range f.Params {
			writeParam(b, "MCA "+f.Name, p)
		}
		for _, c := range f.Components {
			if len(c.Params) == 0 {
				continue
			}
			if c.Description != "" || c.Version != "" {
				fmt.Fprintf(b, "  MCA %s %s: %s", f.Name, c.Name, oneLine(c.Description))
				if c.Version != "" {
					fmt.Fprintf(b, " (version %s)", c.Version)
				}
				fmt.Fprintln(b)
			}
			for _, p := range c.Params {
				writeParam(b, "MCA "+f.Name+" "+c.Name, p)
			}
		}
	}
	if len(r.Params) > 0 {
		fmt.Fprintf(b, "\nMCA %s: parameters of the component system itself\n", baseGroup)
		for _, p := range r.Params {
			writeParam(b, "MCA "+baseGroup, p)
		}
	}
	return b.Flush()
}

func writeParam(b *bufio.Writer, prefix string, p Param) {
	fmt.Fprintf(b, "  %s: parameter %q (current value: %q, data source: %s", prefix, p.Name, p.Value, p.Origin)
	if p.Value != p.Default {
		fmt.Fprintf(b, ", default: %q", p.Default)
	}
	fmt.Fprintf(b, ", level: %s, type: %s)\n", levelName(p.Level), p.Type)
	if p.Help != "" {
		fmt.Fprintf(b, "      %s\n", oneLine(p.Help))
	}
	if len(p.Choices) > 0 {
		fmt.Fprintf(b, "      Valid values: %s\n", strings.Join(p.Choices, ", "))
	}
}

// oneLine keeps a reason or help text on its line: errors from components
// may span lines.
func oneLine(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r", `\r`), "\n", `\n`)
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteParsable writes the report in Open MPI's colon-separated form, one
// fact per line, for scripts:
//
//	version:gompi:<version>
//	amca:set:<name>
//	mca:<framework>:base:framework:description:<text>
//	mca:<framework>:base:framework:selection:<value>
//	mca:<framework>:<component>:component:status:selected
//	mca:<framework>:<component>:param:<name>:value:<value>
//	mca:mca:base:param:<name>:value:<value>
//
// Framework-level parameters use the component "base". Values are the
// rest of the line (they may hold ':'); a line break in a value is written
// as \n.
func (r *Report) WriteParsable(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "version:gompi:%s\n", oneLine(r.Version))
	for _, s := range r.AMCASets {
		fmt.Fprintf(b, "amca:set:%s\n", oneLine(s))
	}
	fmt.Fprintf(b, "probe:role:%s\n", r.Role)
	if iv := r.Interval; iv != nil {
		fmt.Fprintf(b, "checkpoint_interval:mtbf:%d\n", int64(iv.MTBF.Seconds()))
		if iv.Suggested > 0 {
			fmt.Fprintf(b, "checkpoint_interval:checkpoint:%.3f\ncheckpoint_interval:suggested:%d\n", iv.C.Seconds(), int64(iv.Suggested.Round(time.Second).Seconds()))
		} else {
			fmt.Fprintf(b, "checkpoint_interval:note:%s\n", oneLine(iv.Note))
		}
	}
	if r.Protection != "" {
		fmt.Fprintf(b, "snapshot_protection:note:%s\n", oneLine(r.Protection))
	}
	for _, f := range r.Frameworks {
		pre := "mca:" + f.Name + ":base:framework:"
		fmt.Fprintf(b, "%sdescription:%s\n", pre, oneLine(f.Description))
		fmt.Fprintf(b, "%sselection:%s\n", pre, oneLine(f.Selection.Value))
		fmt.Fprintf(b, "%sselection_source:%s\n", pre, oneLine(f.Selection.Origin.String()))
		if wr := f.Wiring; wr != nil {
			fmt.Fprintf(b, "%swiring:%s\n", pre, oneLine(wr.text()))
		}
		for _, c := range f.Components {
			pre := "mca:" + f.Name + ":" + c.Name + ":component:"
			fmt.Fprintf(b, "%sstatus:%s\n", pre, c.Status)
			fmt.Fprintf(b, "%spriority:%d\n", pre, c.Priority)
			fmt.Fprintf(b, "%sorigin:%s\n", pre, oneLine(c.Origin))
			if c.Version != "" {
				fmt.Fprintf(b, "%sversion:%s\n", pre, oneLine(c.Version))
			}
			fmt.Fprintf(b, "%sdescription:%s\n", pre, oneLine(c.Description))
			if c.Reason != "" {
				fmt.Fprintf(b, "%sreason:%s\n", pre, oneLine(c.Reason))
			}
			if c.Note != "" {
				fmt.Fprintf(b, "%snote:%s\n", pre, oneLine(c.Note))
			}
		}
		for _, p := range f.Params {
			writeParsableParam(b, "mca:"+f.Name+":base", p)
		}
		for _, c := range f.Components {
			for _, p := range c.Params {
				writeParsableParam(b, "mca:"+f.Name+":"+c.Name, p)
			}
		}
	}
	for _, p := range r.Params {
		writeParsableParam(b, "mca:"+baseGroup+":base", p)
	}
	return b.Flush()
}

func writeParsableParam(b *bufio.Writer, prefix string, p Param) {
	pre := prefix + ":param:" + p.Name + ":"
	fmt.Fprintf(b, "%svalue:%s\n", pre, oneLine(p.Value))
	fmt.Fprintf(b, "%sdefault:%s\n", pre, oneLine(p.Default))
	fmt.Fprintf(b, "%ssource:%s\n", pre, p.Origin.Source)
	if p.Origin.Where != "" {
		fmt.Fprintf(b, "%swhere:%s\n", pre, oneLine(p.Origin.Where))
	}
	fmt.Fprintf(b, "%stype:%s\n", pre, p.Type)
	fmt.Fprintf(b, "%slevel:%d\n", pre, p.Level)
	if len(p.Choices) > 0 {
		fmt.Fprintf(b, "%schoices:%s\n", pre, oneLine(strings.Join(p.Choices, ",")))
	}
	fmt.Fprintf(b, "%shelp:%s\n", pre, oneLine(p.Help))
}

// text is a framework's wiring in one line.
func (w *Wiring) text() string {
	switch {
	case !w.Selected:
		return "not selected"
	case w.Host == "":
		return w.Select
	}
	return w.Select + "; provisioned with " + w.Host
}
