package mca_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gompi/mca"
)

type host struct{ node string }

type provisioned struct {
	got    host
	closed int
	fail   error
}

func (m *provisioned) Provision(_ context.Context, h host) error { m.got = h; return m.fail }
func (m *provisioned) Close() error                              { m.closed++; return m.fail }

type plain struct{}

func TestProvisionAndClose(t *testing.T) {
	ctx := context.Background()
	m := &provisioned{}
	if ok, err := mca.Provision(ctx, m, host{"n1"}); !ok || err != nil || m.got.node != "n1" {
		t.Fatalf("Provision = %v, %v; host %+v", ok, err, m.got)
	}
	if ok, err := mca.Provision(ctx, m, "another host type"); ok || err != nil {
		t.Fatalf("Provision with a host type the module does not take = %v, %v", ok, err)
	}
	if ok, err := mca.Provision(ctx, plain{}, host{"n1"}); ok || err != nil {
		t.Fatalf("Provision of a module that takes no host = %v, %v", ok, err)
	}
	bad := &provisioned{fail: errors.New("no node")}
	if ok, err := mca.Provision(ctx, bad, host{}); !ok || err == nil {
		t.Fatalf("failing Provision = %v, %v", ok, err)
	}
	if err := mca.Close(plain{}); err != nil {
		t.Fatal(err)
	}
	if err := mca.Close(m); err != nil || m.closed != 1 {
		t.Fatalf("Close = %v, closed %d times", err, m.closed)
	}
}

func TestClosersLastFirstOnce(t *testing.T) {
	var order []string
	var c mca.Closers
	a, b := &provisioned{}, &provisioned{fail: errors.New("busy")}
	c.Module("filem/sftp", a)
	c.Add(func() error { order = append(order, "func"); return nil })
	c.Module("sstore/stage", b)
	c.Module("btl/self", plain{})
	err := c.Close()
	if err == nil || !strings.Contains(err.Error(), "close sstore/stage: busy") || !errors.Is(err, b.fail) {
		t.Fatalf("Close = %v", err)
	}
	if a.closed != 1 || b.closed != 1 || len(order) != 1 {
		t.Fatalf("closed %d, %d, funcs %v", a.closed, b.closed, order)
	}
	if err := c.Close(); err != nil || a.closed != 1 {
		t.Fatalf("second Close = %v, closed %d", err, a.closed)
	}
}
