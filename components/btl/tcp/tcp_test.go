package tcp

import (
	"testing"

	"gompi/frameworks/btl"
	"gompi/frameworks/btl/btltest"
	"gompi/mca"
)

func TestConformance(t *testing.T) {
	btltest.Run(t, "tcp-conformance", func(t *testing.T) btl.Module { return btltest.Module(t, New()) })
}

func TestListenHost(t *testing.T) {
	tests := []struct {
		in            string
		bind, publish string
		wantErr       bool
	}{
		{"", "127.0.0.1", "127.0.0.1", false},
		{"10.1.2.3", "10.1.2.3", "10.1.2.3", false},
		{"lo", "127.0.0.1", "127.0.0.1", false},
	}
	for _, tt := range tests {
		b, p, err := listenHost(tt.in)
		if (err != nil) != tt.wantErr || b != tt.bind || p != tt.publish {
			t.Errorf("listenHost(%q) = %q, %q, %v; want %q, %q, err %v", tt.in, b, p, err, tt.bind, tt.publish, tt.wantErr)
		}
	}
	if _, p, err := listenHost("*"); err != nil || p == "" {
		t.Errorf("listenHost(*) = %q, %v", p, err)
	}
}

func TestBadListenAddr(t *testing.T) {
	m := btltest.Module(t, New(), mca.Setting{Name: paramListen, Value: "192.0.2.77"})
	if _, err := m.Listen(t.Context(), btl.Endpoint{Job: "j"}, func(c btl.Conn) { c.Close() }); err == nil {
		t.Fatal("listening on an address of no interface succeeded")
	}
}

func TestRelisten(t *testing.T) {
	btltest.Relisten(t, "tcp-relisten", func(t *testing.T) btl.Module { return btltest.Module(t, New()) })
}
