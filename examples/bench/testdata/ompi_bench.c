/* The measurements of gompi's bench program (examples/bench, with the
 * loops of mpi/mpibench) in C against Open MPI, for
 * scripts/bench-vs-openmpi.sh: ping-pong latency and streaming bandwidth
 * between ranks 0 and 1, and Allreduce (sum of doubles) over every rank,
 * for sizes from -min to -max doubling, with the same iteration counts,
 * warm-up and window. It prints the rows as the bench program's -json
 * does. Build and run:
 *   mpicc -O2 -o /tmp/ompi_bench ompi_bench.c
 *   mpirun --allow-run-as-root -np 2 --mca btl tcp,self --mca btl_tcp_if_include lo \
 *       /tmp/ompi_bench -min 1 -max 4194304 -tests latency,bandwidth,allreduce
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct options {
    long min, max;
    int iters, warmup, window;
    const char *tests, *transport;
};

/* iters_for scales iterations down above 64 KiB as bench.go's itersFor. */
static int iters_for(const struct options *o, long size) {
    if (size <= 64 << 10) return o->iters;
    long n = (long)o->iters * (64 << 10) / size;
    return n < 10 ? 10 : (int)n;
}

static double pingpong(int rank, char *buf, long size, int warmup, int iters) {
    int other = 1 - rank;
    double start = 0;
    for (int i = 0; i < warmup + iters; i++) {
        if (i == warmup) start = MPI_Wtime();
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

/* batch is one of mpibench.Stream's batches: n messages, window at a
 * time, closed by rank 1's acknowledgement. */
static void batch(int rank, char **bufs, long size, int window, int n, MPI_Request *reqs) {
    for (int i = 0; i < n; i += window) {
        int k;
        for (k = 0; k < window && i + k < n; k++) {
            if (rank == 0) MPI_Isend(bufs[k], size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &reqs[k]);
            else MPI_Irecv(bufs[k], size, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &reqs[k]);
        }
        MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
    }
    if (rank == 0) MPI_Recv(NULL, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else MPI_Send(NULL, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
}

static double stream(int rank, char **bufs, long size, int window, int warmup, int iters, MPI_Request *reqs) {
    batch(rank, bufs, size, window, warmup < window ? warmup : window, reqs);
    double start = MPI_Wtime();
    batch(rank, bufs, size, window, iters, reqs);
    return MPI_Wtime() - start;
}

static void row(const struct options *o, const char *test, long size, int ranks, int iters, double lat, double mbps) {
    printf("{\"test\":\"%s\",\"size\":%ld,\"ranks\":%d,\"transport\":\"%s\",\"iters\":%d", test, size, ranks, o->transport, iters);
    if (lat > 0) printf(",\"latency_us\":%.4f", lat);
    if (mbps > 0) printf(",\"mb_per_s\":%.4f", mbps);
    printf("}\n");
}

static void point_to_point(const struct options *o, int rank, int ranks, int latency) {
    char **bufs = malloc(sizeof(char *) * o->window);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * o->window);
    for (int i = 0; i < o->window; i++) bufs[i] = calloc(1, o->max);
    for (long size = o->min; size <= o->max; size *= 2) {
        int iters = iters_for(o, size);
        double t = 0;
        if (rank < 2) {
            if (latency) t = pingpong(rank, bufs[0], size, o->warmup, iters);
            else t = stream(rank, bufs, size, o->window, o->warmup, iters, reqs);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank != 0) continue;
        if (latency) row(o, "latency", size, ranks, iters, t / iters / 2 * 1e6, (double)size * iters * 2 / t / 1e6);
        else row(o, "bandwidth", size, ranks, iters, 0, (double)size * iters / t / 1e6);
    }
    for (int i = 0; i < o->window; i++) free(bufs[i]);
    free(bufs);
    free(reqs);
}

static void allreduce(const struct options *o, int rank, int ranks) {
    double *in = calloc(1, o->max + 8), *out = calloc(1, o->max + 8);
    for (long size = o->min; size <= o->max; size *= 2) {
        if (size < 8) continue;
        int iters = iters_for(o, size);
        double start = 0;
        for (int i = 0; i < o->warmup + iters; i++) {
            if (i == o->warmup) {
                MPI_Barrier(MPI_COMM_WORLD);
                start = MPI_Wtime();
            }
            MPI_Allreduce(in, out, (int)(size / 8), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
        /* The slowest rank's time, as bench.go and OSU report. */
        double t = (MPI_Wtime() - start) / iters * 1e6, tmax;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0) row(o, "allreduce", size, ranks, iters, tmax, 0);
    }
    free(in);
    free(out);
}

static long size_arg(const char *s) {
    char *end;
    long n = strtol(s, &end, 10);
    if (*end == 'k' || *end == 'K') n <<= 10;
    else if (*end == 'm' || *end == 'M') n <<= 20;
    return n;
}

int main(int argc, char **argv) {
    struct options o = {1, 4 << 20, 1000, 20, 64, "latency,bandwidth,allreduce", "ompi"};
    int rank, ranks;
    MPI_Init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-min")) o.min = size_arg(argv[i + 1]);
        else if (!strcmp(argv[i], "-max")) o.max = size_arg(argv[i + 1]);
        else if (!strcmp(argv[i], "-iters")) o.iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-warmup")) o.warmup = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-window")) o.window = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-tests")) o.tests = argv[i + 1];
        else if (!strcmp(argv[i], "-transport")) o.transport = argv[i + 1];
        else {
            fprintf(stderr, "ompi_bench: unknown flag %s\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (o.min < 1 || o.max < o.min || o.iters < 1 || o.warmup < 0 || o.window < 1) {
        fprintf(stderr, "ompi_bench: want 1 <= -min <= -max, -iters >= 1, -warmup >= 0, -window >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks >= 2 && strstr(o.tests, "latency")) point_to_point(&o, rank, ranks, 1);
    if (ranks >= 2 && strstr(o.tests, "bandwidth")) point_to_point(&o, rank, ranks, 0);
    if (strstr(o.tests, "allreduce")) allreduce(&o, rank, ranks);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
