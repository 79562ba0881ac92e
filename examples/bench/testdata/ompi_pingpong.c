/* The same measurements as gompi's BenchmarkPingPong and BenchmarkStream
 * (mpi/bench_test.go), in C against Open MPI, for the comparison in the
 * benchmark notes. Build and run:
 *   mpicc -O2 -o /tmp/ompi_pingpong ompi_pingpong.c
 *   mpirun --allow-run-as-root -np 2 --mca btl tcp,self --mca btl_tcp_if_include lo /tmp/ompi_pingpong
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double pingpong(int rank, char *buf, int size, int iters) {
    int other = 1 - rank;
    double start = 0;
    for (int i = 0; i < iters + 100; i++) {
        if (i == 100) start = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, size, MPI_BYTE, other, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, size, MPI_BYTE, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, size, MPI_BYTE, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_BYTE, other, 1, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - start;
}

static double stream(int rank, char **bufs, int size, int window, int iters) {
    MPI_Request reqs[64];
    double start = MPI_Wtime();
    for (int i = 0; i < iters; i += window) {
        int k;
        for (k = 0; k < window && i + k < iters; k++) {
            if (rank == 0) MPI_Isend(bufs[k], size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &reqs[k]);
            else MPI_Irecv(bufs[k], size, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &reqs[k]);
        }
        MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
    }
    if (rank == 0) MPI_Recv(NULL, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else MPI_Send(NULL, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
    return MPI_Wtime() - start;
}

int main(int argc, char **argv) {
    int rank, window = 16;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *buf = malloc(1 << 20);
    char *bufs[16];
    for (int i = 0; i < window; i++) bufs[i] = malloc(1 << 20);
    double t8 = pingpong(rank, buf, 8, 100000);
    double t1m = pingpong(rank, buf, 1 << 20, 2000);
    stream(rank, bufs, 1 << 20, window, 64);
    double ts = stream(rank, bufs, 1 << 20, window, 4000);
    if (rank == 0) {
        printf("pingpong 8B:    %8.2f us one-way\n", t8 / 100000 / 2 * 1e6);
        printf("pingpong 1MiB:  %8.1f us one-way, %8.1f MB/s (both directions)\n", t1m / 2000 / 2 * 1e6, 2.0 * (1 << 20) * 2000 / t1m / 1e6);
        printf("stream 1MiB:    %8.1f MB/s\n", (double)(1 << 20) * 4000 / ts / 1e6);
    }
    MPI_Finalize();
    return 0;
}
