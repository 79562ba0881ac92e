package main

import (
	"gompi/cr"
	"gompi/examples/heat/solver"
)

// protect registers heat's state so that it can also be restarted on
// another rank count (gompi-restart -np M): the grid's interior rows are
// a block-distributed array (each rank its rows, uneven when the ranks do
// not divide the size; the halo rows are not saved: the top boundary is
// set by solver.New and the others are exchanged at the start of every
// step), the step and the last residual are the same on every rank.
func protect(c *cr.Coordinator, s *solver.Slab, step *int, residual *float64) error {
	lo, global, rowBytes := s.Rows()
	if err := c.ProtectDistributed("grid", &s.Cur, cr.Block{Global: global, Lo: lo, Elem: rowBytes, Halo: 1}); err != nil {
		return err
	}
	if err := c.ProtectReplicated("step", step); err != nil {
		return err
	}
	return c.ProtectReplicated("residual", residual)
}
