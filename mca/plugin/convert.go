package plugin

import (
	"fmt"

	"gompi/frameworks/crs"
	"gompi/frameworks/filem"
	"gompi/mca"
	pb "gompi/mca/plugin/proto"
)

var paramTypes = map[mca.Type]pb.ParamType{
	mca.String:   pb.ParamType_PARAM_TYPE_STRING,
	mca.Int:      pb.ParamType_PARAM_TYPE_INT,
	mca.Bool:     pb.ParamType_PARAM_TYPE_BOOL,
	mca.Duration: pb.ParamType_PARAM_TYPE_DURATION,
	mca.Size:     pb.ParamType_PARAM_TYPE_SIZE,
	mca.List:     pb.ParamType_PARAM_TYPE_LIST,
}

func specToPB(s mca.ParamSpec) *pb.ParamSpec {
	return &pb.ParamSpec{Name: s.Name, Type: paramTypes[s.Type], DefaultValue: s.Default, Help: s.Help,
		Level: int32(s.Level), Choices: s.Choices}
}

func specFromPB(s *pb.ParamSpec) (mca.ParamSpec, error) {
	for t, w := range paramTypes {
		if w == s.GetType() {
			return mca.ParamSpec{Name: s.GetName(), Type: t, Default: s.GetDefaultValue(), Help: s.GetHelp(),
				Level: mca.Level(s.GetLevel()), Choices: s.GetChoices()}, nil
		}
	}
	return mca.ParamSpec{}, fmt.Errorf("parameter %q has unknown type %d", s.GetName(), s.GetType())
}

func describe(info mca.ComponentInfo) *pb.ComponentDescription {
	d := &pb.ComponentDescription{Framework: info.Framework, Name: info.Name, Description: info.Description,
		Version: info.Version, Priority: int32(info.Priority)}
	for _, p := range info.Params {
		d.Params = append(d.Params, specToPB(p))
	}
	return d
}

func settingsToPB(vals *mca.Values) []*pb.Setting {
	all := vals.All()
	out := make([]*pb.Setting, len(all))
	for i, s := range all {
		out[i] = &pb.Setting{Name: s.Name, Value: []byte(s.Value), Source: int32(s.Origin.Source), Where: []byte(s.Origin.Where)}
	}
	return out
}

func settingsFromPB(in []*pb.Setting) []mca.Setting {
	out := make([]mca.Setting, len(in))
	for i, s := range in {
		out[i] = mca.Setting{Name: s.GetName(), Value: string(s.GetValue()),
			Origin: mca.Origin{Source: mca.Source(s.GetSource()), Where: string(s.GetWhere())}}
	}
	return out
}

func transfersToPB(ts []filem.Transfer) []*pb.Transfer {
	out := make([]*pb.Transfer, len(ts))
	for i, t := range ts {
		out[i] = &pb.Transfer{Local: []byte(t.Local), Remote: remoteToPB(t.Remote)}
	}
	return out
}

func transfersFromPB(in []*pb.Transfer) []filem.Transfer {
	out := make([]filem.Transfer, len(in))
	for i, t := range in {
		out[i] = filem.Transfer{Local: string(t.GetLocal()), Remote: remoteFromPB(t.GetRemote())}
	}
	return out
}

func remoteToPB(r filem.Remote) *pb.Remote { return &pb.Remote{Host: r.Host, Path: []byte(r.Path)} }

func remoteFromPB(r *pb.Remote) filem.Remote {
	return filem.Remote{Host: r.GetHost(), Path: string(r.GetPath())}
}

func remotesToPB(rs []filem.Remote) []*pb.Remote {
	out := make([]*pb.Remote, len(rs))
	for i, r := range rs {
		out[i] = remoteToPB(r)
	}
	return out
}

func remotesFromPB(in []*pb.Remote) []filem.Remote {
	out := make([]filem.Remote, len(in))
	for i, r := range in {
		out[i] = remoteFromPB(r)
	}
	return out
}

func launchToPB(l crs.Launch) *pb.Launch {
	return &pb.Launch{Argv: bytesOf(l.Argv), Env: bytesOf(l.Env), Dir: []byte(l.Dir)}
}

func launchFromPB(l *pb.Launch) crs.Launch {
	return crs.Launch{Argv: stringsOf(l.GetArgv()), Env: stringsOf(l.GetEnv()), Dir: string(l.GetDir())}
}

// bytesOf and stringsOf keep nil as nil, so an empty list stays empty.
func bytesOf(ss []string) [][]byte {
	if ss == nil {
		return nil
	}
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func stringsOf(bs [][]byte) []string {
	if bs == nil {
		return nil
	}
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}
