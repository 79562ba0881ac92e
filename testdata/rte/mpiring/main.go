// Command mpiring checks the runtime under package mpi: it bootstraps mpi
// from the rank client (the modex carries the BTL addresses), sums a
// vector over all ranks, passes a token around the ring, and prints a
// checksum that depends only on -n, not on the number of ranks or nodes.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"math"
	"os"

	"gompi/mpi"
)

func main() {
	n := flag.Int("n", 1000, "length of the vector the ranks sum")
	flag.Parse()
	if err := mpi.Init(context.Background()); err != nil {
		fail(err)
	}
	w := mpi.World()
	rank, size := w.Rank(), w.Size()

	// Rank r owns the elements i with i % size == r; the sum is the full vector.
	local := make([]float64, *n)
	for i := rank; i < *n; i += size {
		local[i] = math.Sqrt(float64(i))
	}
	global := make([]float64, *n)
	if err := mpi.Allreduce(w, local, global, mpi.Sum); err != nil {
		fail(err)
	}
	token := []byte{1}
	if size > 1 {
		if rank == 0 {
			if err := w.Send(token, 1, 7); err != nil {
				fail(err)
			}
			if _, err := w.Recv(token, size-1, 7); err != nil {
				fail(err)
			}
		} else {
			if _, err := w.Recv(token, rank-1, 7); err != nil {
				fail(err)
			}
			token[0]++
			if err := w.Send(token, (rank+1)%size, 7); err != nil {
				fail(err)
			}
		}
	}
	if rank == 0 {
		h := crc32.NewIEEE()
		for _, v := range global {
			// Rounded: the sum's order differs with the number of ranks.
			binary.Write(h, binary.LittleEndian, math.Round(v*1e6))
		}
		fmt.Printf("checksum %08x ring %d/%d\n", h.Sum32(), int(token[0]), size)
	}
	if err := mpi.Finalize(); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mpiring:", err)
	os.Exit(1)
}
