/*
 * heat.c: examples/heat in C. 2-D heat diffusion with Jacobi iterations on
 * an N x N grid split by rows across the ranks (rank r owns interior rows
 * r*N/n .. (r+1)*N/n - 1), halo rows exchanged every step with
 * Irecv/Isend/Waitall, the largest change reduced with Allreduce(MAX).
 * The top edge is held at 100, the other edges at 0. At the end rank 0
 * gathers the interior in row-major order (Gatherv) and prints
 *
 *     heat: NxN grid, S steps, ranks: n, residual R
 *     checksum: <16 hex digits>
 *
 * where the checksum is the FNV-1a hash of the grid's doubles, little-endian:
 * the same line `go run ./examples/heat` prints for the same flags, for any
 * number of ranks and under any MPI (every value is computed in the same
 * order as the Go program, so the grids are bit for bit equal).
 *
 * Flags as the Go program's: -size N (256), -steps S (500), -every K (0),
 * -sleep DURATION (0; Go syntax: 10ms, 1.5s, 200us), also as --flag and
 * -flag=value. Build with gompicc (or any mpicc) and run under gompirun:
 *
 *     gompicc -O2 -o heat examples/c/heat.c && gompirun -np 4 ./heat -size 64 -steps 50
 */
#include <mpi.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HOT 100.0

struct options {
	long size, steps, every;
	double sleep_s;
};

/* parse_duration reads Go's time.Duration syntax ("1.5s", "10ms", "2m3s"). */
static int parse_duration(const char *s, double *out)
{
	static const struct { const char *unit; double sec; } units[] = {
		{"ns", 1e-9}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6}, {"ms", 1e-3},
		{"s", 1}, {"m", 60}, {"h", 3600},
	};
	double total = 0;
	if (strcmp(s, "0") == 0) {
		*out = 0;
		return 0;
	}
	while (*s) {
		char *end;
		double v = strtod(s, &end);
		size_t k, best = 0, bestlen = 0;
		if (end == s)
			return -1;
		for (k = 0; k < sizeof units / sizeof units[0]; k++) {
			size_t l = strlen(units[k].unit);
			if (strncmp(end, units[k].unit, l) == 0 && l > bestlen)
				best = k, bestlen = l;
		}
		if (bestlen == 0)
			return -1;
		total += v * units[best].sec;
		s = end + bestlen;
	}
	*out = total;
	return 0;
}

/* parse_args accepts -name value, -name=value and --name forms. */
static int parse_args(int argc, char **argv, struct options *o)
{
	int i;
	o->size = 256, o->steps = 500, o->every = 0, o->sleep_s = 0;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val, *eq;
		char name[32];
		size_t nl;
		if (a[0] != '-')
			return -1;
		a += (a[1] == '-') ? 2 : 1;
		eq = strchr(a, '=');
		nl = eq ? (size_t)(eq - a) : strlen(a);
		if (nl >= sizeof name)
			return -1;
		memcpy(name, a, nl);
		name[nl] = 0;
		if (eq)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			return -1;
		if (strcmp(name, "sleep") == 0) {
			if (parse_duration(val, &o->sleep_s) != 0)
				return -1;
			continue;
		}
		char *end;
		long v = strtol(val, &end, 10);
		if (*val == 0 || *end != 0)
			return -1;
		if (strcmp(name, "size") == 0)
			o->size = v;
		else if (strcmp(name, "steps") == 0)
			o->steps = v;
		else if (strcmp(name, "every") == 0)
			o->every = v;
		else
			return -1;
	}
	if (o->size < 1 || o->steps < 0 || o->every < 0)
		return -2;
	return 0;
}

struct slab {
	int N, n, r, rows, cols;
	double *cur, *next;
};

static int slab_init(struct slab *s, int N, int n, int r)
{
	int lo = (int)((long)r * N / n), hi = (int)((long)(r + 1) * N / n), j;
	s->N = N, s->n = n, s->r = r, s->rows = hi - lo, s->cols = N + 2;
	s->cur = calloc((size_t)(s->rows + 2) * s->cols, sizeof(double));
	s->next = calloc((size_t)(s->rows + 2) * s->cols, sizeof(double));
	if (!s->cur || !s->next)
		return -1;
	if (r == 0)
		for (j = 0; j < s->cols; j++)
			s->cur[j] = s->next[j] = HOT;
	return 0;
}

/* exchange_halos posts the same requests in the same order as the Go solver. */
static int exchange_halos(struct slab *s)
{
	MPI_Request reqs[4];
	int nreq = 0, up = s->r - 1, down = s->r + 1, cols = s->cols;
	if (up >= 0) {
		MPI_Irecv(s->cur, cols, MPI_DOUBLE, up, 0, MPI_COMM_WORLD, &reqs[nreq++]);
		MPI_Isend(s->cur + cols, cols, MPI_DOUBLE, up, 1, MPI_COMM_WORLD, &reqs[nreq++]);
	}
	if (down < s->n) {
		MPI_Irecv(s->cur + (size_t)(s->rows + 1) * cols, cols, MPI_DOUBLE, down, 1, MPI_COMM_WORLD, &reqs[nreq++]);
		MPI_Isend(s->cur + (size_t)s->rows * cols, cols, MPI_DOUBLE, down, 0, MPI_COMM_WORLD, &reqs[nreq++]);
	}
	return MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE);
}

/* relax computes next from cur, swaps them, and returns the largest change. */
static double relax(struct slab *s)
{
	double *cur = s->cur, *next = s->next, local = 0, *t;
	int i, j, cols = s->cols;
	for (i = 1; i <= s->rows; i++)
		for (j = 1; j <= s->N; j++) {
			double v = 0.25 * (cur[(i - 1) * cols + j] + cur[(i + 1) * cols + j] +
			                   cur[i * cols + j - 1] + cur[i * cols + j + 1]);
			double d = fabs(v - cur[i * cols + j]); /* fabs is a builtin: no -lm */
			if (d > local) /* math.Max for the non-negative, finite changes */
				local = d;
			next[i * cols + j] = v;
		}
	t = s->cur, s->cur = s->next, s->next = t;
	return local;
}

static uint64_t fnv1a(const double *grid, size_t n)
{
	uint64_t h = 14695981039346656037ULL;
	size_t i;
	int k;
	for (i = 0; i < n; i++) {
		uint64_t u;
		memcpy(&u, &grid[i], sizeof u);
		for (k = 0; k < 8; k++) {
			h ^= (uint8_t)(u >> (8 * k));
			h *= 1099511628211ULL;
		}
	}
	return h;
}

/* finish gathers the interior on rank 0 and prints the summary and checksum. */
static int finish(struct slab *s, long steps, double residual)
{
	double *interior = malloc((size_t)s->rows * s->N * sizeof(double) + 1), *grid = NULL;
	int *counts = NULL, *displs = NULL, i, q, err;
	for (i = 1; i <= s->rows; i++)
		memcpy(interior + (size_t)(i - 1) * s->N, s->cur + (size_t)i * s->cols + 1, s->N * sizeof(double));
	if (s->r == 0) {
		grid = malloc((size_t)s->N * s->N * sizeof(double));
		counts = malloc(s->n * sizeof(int));
		displs = malloc(s->n * sizeof(int));
		for (q = 0; q < s->n; q++) {
			int qlo = (int)((long)q * s->N / s->n), qhi = (int)((long)(q + 1) * s->N / s->n);
			counts[q] = (qhi - qlo) * s->N, displs[q] = qlo * s->N;
		}
	}
	err = MPI_Gatherv(interior, s->rows * s->N, MPI_DOUBLE, grid, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	if (err == MPI_SUCCESS && s->r == 0) {
		printf("heat: %dx%d grid, %ld steps, ranks: %d, residual %.6e\n", s->N, s->N, steps, s->n, residual);
		printf("checksum: %016llx\n", (unsigned long long)fnv1a(grid, (size_t)s->N * s->N));
		fflush(stdout);
	}
	free(interior), free(grid), free(counts), free(displs);
	return err;
}

int main(int argc, char **argv)
{
	struct options o;
	struct slab s;
	int rank, size, rc;
	long step;
	double residual = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	rc = parse_args(argc, argv, &o);
	if (rc != 0) {
		if (rank == 0)
			fprintf(stderr, rc == -2 ? "heat: -size must be >= 1, -steps and -every >= 0\n"
			                         : "usage: heat [-size N] [-steps S] [-every K] [-sleep DURATION]\n");
		MPI_Finalize();
		return 2;
	}
	if (o.size < size) {
		if (rank == 0)
			fprintf(stderr, "heat: -size %ld is smaller than the %d ranks: every rank needs a row\n", o.size, size);
		MPI_Finalize();
		return 1;
	}
	if (slab_init(&s, (int)o.size, size, rank) != 0) {
		fprintf(stderr, "heat: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (step = 1; step <= o.steps; step++) {
		double res;
		if (exchange_halos(&s) != MPI_SUCCESS)
			MPI_Abort(MPI_COMM_WORLD, 1);
		res = relax(&s);
		MPI_Allreduce(MPI_IN_PLACE, &res, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		residual = res;
		if (rank == 0 && o.every > 0 && step % o.every == 0) {
			printf("step %ld: residual %.6e\n", step, residual);
			fflush(stdout);
		}
		if (o.sleep_s > 0) {
			struct timespec ts = {(time_t)o.sleep_s, (long)((o.sleep_s - (time_t)o.sleep_s) * 1e9)};
			nanosleep(&ts, NULL);
		}
	}
	rc = finish(&s, o.steps, residual);
	free(s.cur), free(s.next);
	MPI_Finalize();
	return rc == MPI_SUCCESS ? 0 : 1;
}
