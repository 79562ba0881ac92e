// The C++ program of the CMake project (MPI's C API from C++).
#include <mpi.h>
#include <iostream>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank = 0, size = 0, sum = 0;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	std::cout << "cxx rank " << rank << " of " << size << " sum " << sum << std::endl;
	MPI_Finalize();
	return 0;
}
