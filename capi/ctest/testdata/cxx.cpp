// A C++ program on the C interface: templates and the standard library
// around MPI calls, built with mpicxx/gompicxx.
#include "ctest.h"
#include <numeric>
#include <vector>

template <typename T> static MPI_Datatype mpi_type();
template <> MPI_Datatype mpi_type<int>() { return MPI_INT; }
template <> MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
template <> MPI_Datatype mpi_type<long long>() { return MPI_LONG_LONG; }

template <typename T> static std::vector<T> allgathered(T v)
{
	std::vector<T> all(ct_size);
	MPI_Allgather(&v, 1, mpi_type<T>(), all.data(), 1, mpi_type<T>(), MPI_COMM_WORLD);
	return all;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	ct_begin(argc, argv);
	auto ints = allgathered<int>(ct_rank * 3);
	auto dbls = allgathered<double>(ct_rank / 4.0);
	auto lls = allgathered<long long>(1LL << (32 + ct_rank));
	ct_out("ints sum %d", std::accumulate(ints.begin(), ints.end(), 0));
	ct_out("doubles sum %.17g", std::accumulate(dbls.begin(), dbls.end(), 0.0));
	ct_out("long longs sum %lld", std::accumulate(lls.begin(), lls.end(), 0LL));
	std::vector<int> ring(5, ct_rank), got(5);
	int next = (ct_rank + 1) % ct_size, prev = (ct_rank + ct_size - 1) % ct_size;
	MPI_Sendrecv(ring.data(), 5, MPI_INT, next, 0, got.data(), 5, MPI_INT, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	ct_out("ring got %d x%zu", got[0], got.size());
	return ct_end();
}
