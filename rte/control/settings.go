package control

import (
	"gompi/mca"
	pb "gompi/rte/control/proto"
)

// The job's MCA settings as they travel from gompirun to its daemons and
// from a daemon to its ranks. They live here, beside the other converters
// of the control protocol, so a rank (package mpi through rte/rankclient)
// reads them without linking gompid's package and its commands.

// SettingsFromProto converts settings from the wire.
func SettingsFromProto(in []*pb.Setting) []mca.Setting {
	out := make([]mca.Setting, 0, len(in))
	for _, s := range in {
		var src mca.Source
		if err := src.UnmarshalText([]byte(s.Source)); err != nil {
			src = mca.SourceCommandLine // a newer sender's source: it was set on purpose
		}
		out = append(out, mca.Setting{Name: s.Name, Value: s.Value, Origin: mca.Origin{Source: src, Where: s.Where}})
	}
	return out
}

// SettingsToProto converts settings for the wire.
func SettingsToProto(in []mca.Setting) []*pb.Setting {
	out := make([]*pb.Setting, 0, len(in))
	for _, s := range in {
		out = append(out, &pb.Setting{Name: s.Name, Value: s.Value, Source: s.Origin.Source.String(), Where: s.Origin.Where})
	}
	return out
}
