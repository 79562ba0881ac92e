package plugin

import (
	"fmt"

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
