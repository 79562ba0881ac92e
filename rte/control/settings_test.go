package control

import (
	"reflect"
	"testing"

	"gompi/mca"
	pb "gompi/rte/control/proto"
)

func TestSettingsRoundTrip(t *testing.T) {
	in := []mca.Setting{
		{Name: "a", Value: "1", Origin: mca.Origin{Source: mca.SourceCommandLine, Where: "--mca"}},
		{Name: "b", Value: "", Origin: mca.Origin{Source: mca.SourceDefault}},
		{Name: "c", Value: "x y", Origin: mca.Origin{Source: mca.SourceUserFile, Where: "/h/.gompi/mca-params.conf:3"}},
	}
	if got := SettingsFromProto(SettingsToProto(in)); !reflect.DeepEqual(got, in) {
		t.Errorf("round trip: %+v, want %+v", got, in)
	}
	// A source this version does not know is taken as set on purpose.
	got := SettingsFromProto([]*pb.Setting{{Name: "d", Value: "v", Source: "from the future"}})
	if got[0].Origin.Source != mca.SourceCommandLine {
		t.Errorf("unknown source became %v", got[0].Origin.Source)
	}
}
