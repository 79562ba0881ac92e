package mpi

import (
	"fmt"
	"unsafe"

	"gompi/frameworks/coll"
)

// Numeric is the element types the typed helpers and reductions take.
// Values travel in the machine's byte order: every rank of a job must run
// on the same architecture.
type Numeric = coll.Numeric

// Op is a reduction operation. All are commutative; floating-point results
// are still bitwise deterministic for a given communicator size (and root),
// because the order of combination is fixed by the algorithm: by default
// one that does not depend on which ranks share a node (coll han runs
// floating-point reductions in a layout-dependent order only when
// coll_han_float_order is "layout").
type Op = coll.Op

// The reduction operations.
const (
	Sum  = coll.Sum
	Prod = coll.Prod
	Min  = coll.Min
	Max  = coll.Max
)

func sizeOf[T Numeric]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// bytesOf views a slice of numbers as its bytes (no copy).
func bytesOf[T Numeric](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*sizeOf[T]())
}

// reductionFor describes op on elements of type T for the coll modules.
func reductionFor[T Numeric](op Op) (coll.Reduction, error) {
	red, err := coll.NewReduction[T](op)
	if err != nil {
		return coll.Reduction{}, fmt.Errorf("mpi: %w: %w", ErrArg, err)
	}
	return red, nil
}

// Count returns a status's count in elements of T.
func Count[T Numeric](st Status) int { return st.Count / sizeOf[T]() }

// SendT sends a slice of numbers.
func SendT[T Numeric](c *Comm, buf []T, dst, tag int) error { return c.Send(bytesOf(buf), dst, tag) }

// RecvT receives a slice of numbers; Count[T](status) is how many arrived.
func RecvT[T Numeric](c *Comm, buf []T, src, tag int) (Status, error) {
	return c.Recv(bytesOf(buf), src, tag)
}

// IsendT starts sending a slice of numbers.
func IsendT[T Numeric](c *Comm, buf []T, dst, tag int) (*Request, error) {
	return c.Isend(bytesOf(buf), dst, tag)
}

// IrecvT starts receiving a slice of numbers.
func IrecvT[T Numeric](c *Comm, buf []T, src, tag int) (*Request, error) {
	return c.Irecv(bytesOf(buf), src, tag)
}

// SendrecvT exchanges slices of numbers.
func SendrecvT[T Numeric](c *Comm, sendbuf []T, dst, sendtag int, recvbuf []T, src, recvtag int) (Status, error) {
	return c.Sendrecv(bytesOf(sendbuf), dst, sendtag, bytesOf(recvbuf), src, recvtag)
}

// BcastT broadcasts root's buf to every rank's buf.
func BcastT[T Numeric](c *Comm, buf []T, root int) error { return c.Bcast(bytesOf(buf), root) }

// IbcastT starts a broadcast.
func IbcastT[T Numeric](c *Comm, buf []T, root int) (*Request, error) {
	return c.Ibcast(bytesOf(buf), root)
}

// Reduce combines every rank's send element-wise with op into root's recv
// (recv is ignored elsewhere). send and recv may be the same slice.
func Reduce[T Numeric](c *Comm, send, recv []T, op Op, root int) error {
	red, err := reductionFor[T](op)
	if err != nil {
		return err
	}
	if err := c.checkOp(); err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return err
	}
	if c.rank == root && len(recv) < len(send) {
		return fmt.Errorf("mpi: reduce: %w: recv holds %d elements, send %d", ErrArg, len(recv), len(send))
	}
	var rb []byte
	if c.rank == root {
		rb = bytesOf(recv[:len(send)])
	}
	return c.reduce(c.nextTag(), bytesOf(send), rb, red, root)
}

// Allreduce combines every rank's send element-wise with op into every
// rank's recv; all ranks get bitwise identical results. send and recv may
// be the same slice.
func Allreduce[T Numeric](c *Comm, send, recv []T, op Op) error {
	red, err := reductionFor[T](op)
	if err != nil {
		return err
	}
	if err := c.checkOp(); err != nil {
		return err
	}
	if len(recv) < len(send) {
		return fmt.Errorf("mpi: allreduce: %w: recv holds %d elements, send %d", ErrArg, len(recv), len(send))
	}
	return c.allreduce(c.nextTag(), bytesOf(send), bytesOf(recv[:len(send)]), red)
}

// Iallreduce starts an Allreduce; send and recv belong to the library
// until the request completes.
func Iallreduce[T Numeric](c *Comm, send, recv []T, op Op) (*Request, error) {
	red, err := reductionFor[T](op)
	if err != nil {
		return nil, err
	}
	if err := c.checkOp(); err != nil {
		return nil, err
	}
	if len(recv) < len(send) {
		return nil, fmt.Errorf("mpi: iallreduce: %w: recv holds %d elements, send %d", ErrArg, len(recv), len(send))
	}
	tag := c.nextTag()
	sb, rb := bytesOf(send), bytesOf(recv[:len(send)])
	return c.async(func() error { return c.allreduce(tag, sb, rb, red) }), nil
}

// GatherT gathers every rank's send, in rank order, into root's recv.
func GatherT[T Numeric](c *Comm, send, recv []T, root int) error {
	return c.Gather(bytesOf(send), bytesOf(recv), root)
}

// GathervT gathers counts[i] elements from rank i into root's recv at
// displs[i] (counts and displs in elements, read at root only).
func GathervT[T Numeric](c *Comm, send, recv []T, counts, displs []int, root int) error {
	return c.Gatherv(bytesOf(send), bytesOf(recv), scale(counts, sizeOf[T]()), scale(displs, sizeOf[T]()), root)
}

// ScatterT sends the i-th block of root's send to rank i's recv.
func ScatterT[T Numeric](c *Comm, send, recv []T, root int) error {
	return c.Scatter(bytesOf(send), bytesOf(recv), root)
}

// ScattervT sends counts[i] elements at displs[i] of root's send to rank i.
func ScattervT[T Numeric](c *Comm, send []T, counts, displs []int, recv []T, root int) error {
	return c.Scatterv(bytesOf(send), scale(counts, sizeOf[T]()), scale(displs, sizeOf[T]()), bytesOf(recv), root)
}

// AllgatherT gathers every rank's send, in rank order, into every recv.
func AllgatherT[T Numeric](c *Comm, send, recv []T) error {
	return c.Allgather(bytesOf(send), bytesOf(recv))
}

// AlltoallT sends block i of send to rank i and receives rank i's block
// into block i of recv.
func AlltoallT[T Numeric](c *Comm, send, recv []T) error {
	return c.Alltoall(bytesOf(send), bytesOf(recv))
}

func scale(v []int, k int) []int {
	if v == nil {
		return nil
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = x * k
	}
	return out
}
