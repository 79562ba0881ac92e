package mca

import "strings"

func registerBaseParams(p *Params) {
	p.Register("mca",
		ParamSpec{Name: "mca_base_param_file_prefix", Type: List, Level: LevelUser,
			Help: "AMCA parameter sets to apply, leftmost strongest (what -am sets); searched in the installed set folder, the current directory, then the built-in sets"},
		ParamSpec{Name: "mca_base_component_path", Type: String, Level: LevelTuner,
			Help: "Colon-separated folders searched for out-of-process component plugins; empty means $HOME/.gompi/plugins and the installation's lib/gompi"},
		ParamSpec{Name: "mca_base_component_show_load_errors", Type: Bool, Default: "1", Level: LevelTuner,
			Help: "Report components (built-in or plugin) that failed to load; when off they are skipped silently"},
		ParamSpec{Name: "ft_cr_enabled", Type: Bool, Default: "0", Level: LevelUser,
			Help: "Enable checkpoint/restart (set by -am ft-enable-cr); off, C/R costs nothing"},
	)
}

// NormalizeArgs rewrites the Open MPI spellings of the parameter flags into
// single tokens a flag parser can take: `--mca name value`, `-mca name
// value`, `--mca name=value` and `--mca=name=value` become
// `--mca=name=value`; `-am set` and `--am set` become `--am=set`. It stops
// at `--`, and, when stopAtArg is set, at the first argument that is not a
// flag (for launchers, whose program arguments must pass untouched);
// valueFlags names the launcher's other flags that take a separate value.
func NormalizeArgs(args []string, stopAtArg bool, valueFlags ...string) []string {
	takesValue := map[string]bool{}
	for _, f := range valueFlags {
		takesValue[f] = true
	}
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case a == "--mca" || a == "-mca" || a == "--gmca" || a == "-gmca":
			switch {
			case i+1 < len(args) && strings.Contains(args[i+1], "="):
				out = append(out, "--mca="+args[i+1])
				i++
			case i+2 < len(args):
				out = append(out, "--mca="+args[i+1]+"="+args[i+2])
				i += 2
			default:
				out = append(out, a) // let the flag parser report the missing value
			}
		case strings.HasPrefix(a, "--mca=") || strings.HasPrefix(a, "-mca="):
			out = append(out, "--mca="+a[strings.Index(a, "=")+1:])
		case (a == "-am" || a == "--am") && i+1 < len(args):
			out = append(out, "--am="+args[i+1])
			i++
		case strings.HasPrefix(a, "-am="):
			out = append(out, "-"+a)
		case strings.HasPrefix(a, "-"):
			out = append(out, a)
			if takesValue[a] && i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
		default:
			if stopAtArg {
				return append(out, args[i:]...)
			}
			out = append(out, a)
		}
	}
	return out
}
