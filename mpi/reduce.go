package mpi

import (
	"fmt"

	"gompi/frameworks/coll"
)

// Reduction is an element-wise reduction as the collectives run it: a
// predefined op on a kind (OpReduction, coll.ReductionOf) or a user op
// (UserReduction).
type Reduction = coll.Reduction

// The predefined operations beyond Sum, Prod, Min and Max (coll.Land...):
// logical, bitwise, MINLOC/MAXLOC on the pair types, and the one-sided
// Replace and NoOp.
const (
	Land    = coll.Land
	Lor     = coll.Lor
	Lxor    = coll.Lxor
	Band    = coll.Band
	Bor     = coll.Bor
	Bxor    = coll.Bxor
	MinLoc  = coll.MinLoc
	MaxLoc  = coll.MaxLoc
	Replace = coll.Replace
	NoOp    = coll.NoOp
)

// OpReduction returns predefined op on elements of dt: a predefined
// datatype, or a dense one made of a single kind (a contiguous run of
// ints). The collectives then take count*dt.Extent() bytes of memory as
// they are (a pair type's padding included).
func OpReduction(op Op, dt *Datatype) (Reduction, error) {
	if dt == nil {
		return Reduction{}, fmt.Errorf("mpi: %w: no datatype", ErrArg)
	}
	k := dt.kind
	if k == coll.KindNone && dt.Dense() && dt.base != coll.KindNone {
		k = dt.base
	}
	red, err := coll.ReductionOf(op, k)
	if err != nil {
		return Reduction{}, fmt.Errorf("mpi: %w: %w (datatype %s)", ErrArg, err, dt)
	}
	return red, nil
}

// UserReduction is a user-defined op (MPI_Op_create) on elements of dt:
// fn combines in into inout as inout = in op inout over len/Extent
// elements laid out as in memory, in holding the lower ranks' part when
// the op does not commute (then it is combined in rank order, and no
// hierarchical algorithm takes it).
func UserReduction(fn func(in, inout []byte), dt *Datatype, commute bool) Reduction {
	return coll.UserReduction(fn, max(1, dt.Extent()), commute)
}

func checkRed(op string, red Reduction, n int) error {
	if red.Fn == nil || red.Elem <= 0 || n%red.Elem != 0 {
		return fmt.Errorf("mpi: %s: %w: %d bytes are no whole number of %d-byte elements (or no function)", op, ErrArg, n, red.Elem)
	}
	return nil
}

// ReduceBytes combines every rank's send with red into root's recv
// (ignored elsewhere). send and recv may be the same bytes (MPI_IN_PLACE).
func (c *Comm) ReduceBytes(send, recv []byte, red Reduction, root int) error {
	tag, rb, err := c.reduceArgs("reduce", send, recv, red, root)
	if err != nil {
		return err
	}
	return c.reduce(tag, send, rb, red, root)
}

// IreduceBytes starts a ReduceBytes; the buffers belong to the library
// until the request completes.
func (c *Comm) IreduceBytes(send, recv []byte, red Reduction, root int) (*Request, error) {
	tag, rb, err := c.reduceArgs("ireduce", send, recv, red, root)
	if err != nil {
		return nil, err
	}
	return c.async(func() error { return c.reduce(tag, send, rb, red, root) }), nil
}

func (c *Comm) reduceArgs(op string, send, recv []byte, red Reduction, root int) (int, []byte, error) {
	if err := c.checkOp(); err != nil {
		return 0, nil, err
	}
	if err := c.checkRoot(root); err != nil {
		return 0, nil, err
	}
	if err := checkRed(op, red, len(send)); err != nil {
		return 0, nil, err
	}
	if c.rank != root {
		return c.nextTag(), nil, nil
	}
	if len(recv) < len(send) {
		return 0, nil, fmt.Errorf("mpi: %s: %w: recv holds %d bytes, send %d", op, ErrArg, len(recv), len(send))
	}
	return c.nextTag(), recv[:len(send)], nil
}

// AllreduceBytes combines every rank's send with red into every rank's
// recv. send and recv may be the same bytes (MPI_IN_PLACE).
func (c *Comm) AllreduceBytes(send, recv []byte, red Reduction) error {
	tag, err := c.allreduceArgs("allreduce", send, recv, red)
	if err != nil {
		return err
	}
	return c.allreduce(tag, send, recv[:len(send)], red)
}

// IallreduceBytes starts an AllreduceBytes; the buffers belong to the
// library until the request completes.
func (c *Comm) IallreduceBytes(send, recv []byte, red Reduction) (*Request, error) {
	tag, err := c.allreduceArgs("iallreduce", send, recv, red)
	if err != nil {
		return nil, err
	}
	rb := recv[:len(send)]
	return c.async(func() error { return c.allreduce(tag, send, rb, red) }), nil
}

func (c *Comm) allreduceArgs(op string, send, recv []byte, red Reduction) (int, error) {
	if err := c.checkOp(); err != nil {
		return 0, err
	}
	if err := checkRed(op, red, len(send)); err != nil {
		return 0, err
	}
	if len(recv) < len(send) {
		return 0, fmt.Errorf("mpi: %s: %w: recv holds %d bytes, send %d", op, ErrArg, len(recv), len(send))
	}
	return c.nextTag(), nil
}

// Ireduce starts a Reduce; send and recv belong to the library until the
// request completes.
func Ireduce[T Numeric](c *Comm, send, recv []T, op Op, root int) (*Request, error) {
	red, err := reductionFor[T](op)
	if err != nil {
		return nil, err
	}
	var rb []byte
	if c.rank == root {
		if len(recv) < len(send) {
			return nil, fmt.Errorf("mpi: ireduce: %w: recv holds %d elements, send %d", ErrArg, len(recv), len(send))
		}
		rb = bytesOf(recv[:len(send)])
	}
	return c.IreduceBytes(bytesOf(send), rb, red, root)
}
