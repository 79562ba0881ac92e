/*
 * mixloop.c: a collective-heavy MPI loop with no checkpoint/restart code,
 * the C program gompi's transparent checkpoints (crs=criu) are tested and
 * measured on (rte/e2e's TestCRIUCProgram, scripts/bench-c-criu.sh).
 *
 * Each iteration i, every rank:
 *   - hands its own pthread (started after MPI_Init; calling MPI only with -mt) one
 *     pass over the rank's state (-state MiB of 64-bit words, every word
 *     rewritten), which runs while the main thread communicates;
 *   - sends a column of its 8x8 block (a vector datatype) to its right
 *     neighbour and receives one from its left (Irecv/Isend/Waitall);
 *   - if it is iteration i's laggard (rank i % size), sleeps -pace-us
 *     microseconds while -pace-while's file exists (always, without
 *     -pace-while), so the others wait inside the collectives that follow;
 *     at iteration -hold-at it stays held for as long as that file exists;
 *   - Ibcast of an array of structs {int, double, int64} (a struct
 *     datatype, resized) from rank i % size, overlapped with an
 *     Iallreduce(SUM) of 4 words, completed by Waitall; Allreduce(MAX);
 *     every third iteration Alltoall, every fifth Ibarrier and Wait, every
 *     seventh Scan;
 *   - waits for its pthread and folds everything it received and the
 *     pass's digest into its running hash.
 * Rank 0 prints "iter N" every -every iterations (0: never), then gathers
 * the ranks' hashes and prints
 *
 *     mixloop: R ranks, I iterations, S MiB of state a rank
 *     checksum: <16 hex digits>
 *
 * which depends only on R, I and S: every value is an integer or a double
 * that is exact in binary, whatever the placement, transport or timing.
 * With -mt 1 (MPI_THREAD_MULTIPLE) the pthread also calls MPI: an
 * Allreduce of each pass's digest on a duplicate of MPI_COMM_WORLD, while
 * the main thread is in its own calls; the checksum then differs.
 * With -stalls 1 every rank then prints "stalls rank=R p2p=N pace=N ..."
 * the number of times each part of its iterations took 250 ms or more:
 * where checkpoints found the rank (a dump holds it longer than that).
 *
 *     gompicc -O2 -o mixloop examples/c/mixloop.c -lpthread
 *     gompirun -np 4 ./mixloop -iters 200 -every 50
 *
 * It is C++ too (gompicxx -x c++ builds it: the mallocs are cast, and its
 * thread is then a std::thread), so the tests checkpoint a C++ program
 * with its C++ runtime, with no second source to keep in step.
 */
#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __cplusplus
#include <thread>
#endif

#define SIDE 8
#define NSTRUCT 16
#define FNV_PRIME 1099511628211ULL
#define STALL 0.25 /* seconds: a part of an iteration that took longer stalled */

/* The parts of an iteration, for -stalls: a part that took STALL or more
 * is where something held the rank, such as a checkpoint. */
enum part { P2P, PACE, NBC, ALLREDUCE, ALLTOALL, IBARRIER, SCAN, THREAD, NPARTS };
static const char *part_names[NPARTS] = {"p2p", "pace", "ibcast+iallreduce", "allreduce", "alltoall", "ibarrier", "scan", "thread"};
static long stalled[NPARTS];

/* TIMED runs stmt as part k, counting a stall. */
#define TIMED(k, stmt)                                   \
	do {                                             \
		double t0_ = MPI_Wtime();                \
		stmt;                                    \
		if (MPI_Wtime() - t0_ >= STALL)          \
			stalled[k]++;                    \
	} while (0)

struct options {
	long iters, every, state_mib, pace_us, stalls, mt, hold_at;
	const char *pace_while;
};

struct item {
	int a;
	double b;
	int64_t c;
};

/* worker is the rank's own thread: it rewrites the state once per pass
 * the main thread posts, and leaves the pass's digest. */
struct worker {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t *state;
	size_t words;
	long posted, done; /* passes asked for and finished */
	uint64_t digest;
	int quit;
	MPI_Comm comm; /* with -mt 1, a dup of MPI_COMM_WORLD the thread's Allreduce runs on */
};

static uint64_t fold(uint64_t h, uint64_t v) { return (h ^ v) * FNV_PRIME; }

static void *work(void *arg)
{
	struct worker *w = (struct worker *)arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (w->posted == w->done && !w->quit)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->quit)
			break;
		long pass = w->done;
		pthread_mutex_unlock(&w->mu);
		uint64_t d = 14695981039346656037ULL;
		for (size_t j = 0; j < w->words; j++) {
			w->state[j] = w->state[j] * 6364136223846793005ULL + (uint64_t)(pass ^ (long)j);
			d ^= w->state[j];
		}
		if (w->comm != MPI_COMM_NULL) {
			uint64_t sum;
			MPI_Allreduce(&d, &sum, 1, MPI_UINT64_T, MPI_SUM, w->comm);
			d = fold(d, sum);
		}
		pthread_mutex_lock(&w->mu);
		w->digest = d;
		w->done++;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void post(struct worker *w)
{
	pthread_mutex_lock(&w->mu);
	w->posted++;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static uint64_t collect(struct worker *w)
{
	pthread_mutex_lock(&w->mu);
	while (w->done != w->posted)
		pthread_cond_wait(&w->cv, &w->mu);
	uint64_t d = w->digest;
	pthread_mutex_unlock(&w->mu);
	return d;
}

static int parse_args(int argc, char **argv, struct options *o)
{
	*o = (struct options){.iters = 200, .every = 0, .state_mib = 1, .pace_us = 0, .stalls = 0, .mt = 0, .hold_at = -1, .pace_while = NULL};
	for (int i = 1; i < argc; i++) {
		const char *name = argv[i];
		while (*name == '-')
			name++;
		if (i + 1 >= argc)
			return -1;
		const char *val = argv[++i];
		if (strcmp(name, "pace-while") == 0)
			o->pace_while = val;
		else if (strcmp(name, "iters") == 0)
			o->iters = atol(val);
		else if (strcmp(name, "every") == 0)
			o->every = atol(val);
		else if (strcmp(name, "state") == 0)
			o->state_mib = atol(val);
		else if (strcmp(name, "pace-us") == 0)
			o->pace_us = atol(val);
		else if (strcmp(name, "stalls") == 0)
			o->stalls = atol(val);
		else if (strcmp(name, "mt") == 0)
			o->mt = atol(val);
		else if (strcmp(name, "hold-at") == 0)
			o->hold_at = atol(val);
		else
			return -1;
	}
	return o->iters > 0 && o->state_mib >= 0 && o->pace_us >= 0 ? 0 : -1;
}

/* types builds the column of a SIDE x SIDE block of int64 and the struct
 * item's datatype, resized to its C size. */
static void types(MPI_Datatype *column, MPI_Datatype *items)
{
	MPI_Type_vector(SIDE, 1, SIDE, MPI_INT64_T, column);
	MPI_Type_commit(column);
	int lens[3] = {1, 1, 1};
	MPI_Aint disp[3] = {offsetof(struct item, a), offsetof(struct item, b), offsetof(struct item, c)};
	MPI_Datatype ts[3] = {MPI_INT, MPI_DOUBLE, MPI_INT64_T}, raw;
	MPI_Type_create_struct(3, lens, disp, ts, &raw);
	MPI_Type_create_resized(raw, 0, sizeof(struct item), items);
	MPI_Type_commit(items);
	MPI_Type_free(&raw);
}

/* pace holds iteration i's laggard, so the others wait in the collectives;
 * at iteration -hold-at it holds it for as long as -pace-while's file
 * exists, so a test's checkpoints never run out of iterations however slow
 * they are, and still find the others inside the collectives. */
static void pace(const struct options *o, long i, int rank, int size)
{
	if (o->pace_us == 0 || i % size != rank)
		return;
	if (o->pace_while != NULL && access(o->pace_while, F_OK) != 0)
		return;
	usleep((useconds_t)o->pace_us);
	while (i == o->hold_at && o->pace_while != NULL && access(o->pace_while, F_OK) == 0)
		usleep((useconds_t)o->pace_us);
}

/* step is one iteration's communication; it returns the hash h folded
 * with what arrived. */
static uint64_t step(const struct options *o, long i, int rank, int size, MPI_Datatype column, MPI_Datatype items,
		     int64_t block[SIDE][SIDE], uint64_t h)
{
	int right = (rank + 1) % size, left = (rank + size - 1) % size, root = (int)(i % size);
	MPI_Request rq[4];
	for (int r = 0; r < SIDE; r++)
		block[r][SIDE - 1] = (int64_t)(i * 1000 + rank * SIDE + r);
	MPI_Irecv(&block[0][0], 1, column, left, 7, MPI_COMM_WORLD, &rq[0]);
	MPI_Isend(&block[0][SIDE - 1], 1, column, right, 7, MPI_COMM_WORLD, &rq[1]);
	TIMED(P2P, MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
	for (int r = 0; r < SIDE; r++)
		h = fold(h, (uint64_t)block[r][0]);

	TIMED(PACE, pace(o, i, rank, size));
	struct item its[NSTRUCT];
	memset(its, 0, sizeof its);
	if (rank == root)
		for (int k = 0; k < NSTRUCT; k++)
			its[k] = (struct item){.a = (int)(i + k), .b = (double)(i * k) + 0.5, .c = (int64_t)i * k * 7919};
	uint64_t mine[4] = {(uint64_t)i, (uint64_t)rank, (uint64_t)(i * rank), h & 0xffff}, sum[4];
	MPI_Ibcast(its, NSTRUCT, items, root, MPI_COMM_WORLD, &rq[2]);
	MPI_Iallreduce(mine, sum, 4, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD, &rq[3]);
	TIMED(NBC, MPI_Waitall(2, rq + 2, MPI_STATUSES_IGNORE));
	for (int k = 0; k < NSTRUCT; k++)
		h = fold(fold(fold(h, (uint64_t)its[k].a), (uint64_t)(its[k].b * 2)), (uint64_t)its[k].c);
	for (int k = 0; k < 4; k++)
		h = fold(h, sum[k]);

	int64_t v = (int64_t)((h >> 8) & 0xffffff), mx;
	TIMED(ALLREDUCE, MPI_Allreduce(&v, &mx, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
	h = fold(h, (uint64_t)mx);
	if (i % 3 == 0) {
		int *out = (int *)malloc(sizeof(int) * (size_t)size), *in = (int *)malloc(sizeof(int) * (size_t)size);
		for (int p = 0; p < size; p++)
			out[p] = (int)(i * 100 + rank * 10 + p);
		TIMED(ALLTOALL, MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, MPI_COMM_WORLD));
		for (int p = 0; p < size; p++)
			h = fold(h, (uint64_t)in[p]);
		free(out);
		free(in);
	}
	if (i % 5 == 0) {
		MPI_Request b;
		MPI_Ibarrier(MPI_COMM_WORLD, &b);
		TIMED(IBARRIER, MPI_Wait(&b, MPI_STATUS_IGNORE));
	}
	if (i % 7 == 0) {
		long x = i + rank, pre;
		TIMED(SCAN, MPI_Scan(&x, &pre, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
		h = fold(h, (uint64_t)pre);
	}
	return h;
}

int main(int argc, char **argv)
{
	struct options o;
	int rank, size, provided;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (parse_args(argc, argv, &o) != 0) {
		if (rank == 0)
			fprintf(stderr, "usage: mixloop [-iters N] [-every K] [-state MiB] [-pace-us U] [-pace-while FILE] [-hold-at I] [-stalls 1] [-mt 1]\n");
		MPI_Finalize();
		return 2;
	}
	struct worker w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .comm = MPI_COMM_NULL};
	if (o.mt) {
		if (provided < MPI_THREAD_MULTIPLE) {
			fprintf(stderr, "mixloop: -mt needs MPI_THREAD_MULTIPLE (provided: %d)\n", provided);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		MPI_Comm_dup(MPI_COMM_WORLD, &w.comm);
	}
	w.words = (size_t)o.state_mib * (1 << 20) / sizeof(uint64_t);
	w.state = (uint64_t *)malloc(w.words * sizeof(uint64_t) + 1);
	if (w.state == NULL) {
		fprintf(stderr, "mixloop: no memory for %ld MiB of state\n", o.state_mib);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (size_t j = 0; j < w.words; j++)
		w.state[j] = (uint64_t)rank * w.words + j;
#ifdef __cplusplus
	std::thread th(work, &w); /* the C++ runtime's thread, over pthreads */
#else
	pthread_t th;
	pthread_create(&th, NULL, work, &w);
#endif

	MPI_Datatype column, items;
	types(&column, &items);
	int64_t block[SIDE][SIDE];
	memset(block, 0, sizeof block);
	uint64_t h = 14695981039346656037ULL;
	for (long i = 0; i < o.iters; i++) {
		post(&w);
		h = step(&o, i, rank, size, column, items, block, h);
		uint64_t d;
		TIMED(THREAD, d = collect(&w));
		h = fold(h, d);
		if (rank == 0 && o.every > 0 && (i + 1) % o.every == 0) {
			printf("iter %ld\n", i + 1);
			fflush(stdout);
		}
	}
	pthread_mutex_lock(&w.mu);
	w.quit = 1;
	pthread_cond_broadcast(&w.cv);
	pthread_mutex_unlock(&w.mu);
#ifdef __cplusplus
	th.join();
#else
	pthread_join(th, NULL);
#endif
	if (w.comm != MPI_COMM_NULL)
		MPI_Comm_free(&w.comm);

	uint64_t *all = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)size);
	MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		uint64_t sum = 14695981039346656037ULL;
		for (int p = 0; p < size; p++)
			sum = fold(sum, all[p]);
		printf("mixloop: %d ranks, %ld iterations, %ld MiB of state a rank\n", size, o.iters, o.state_mib);
		printf("checksum: %016llx\n", (unsigned long long)sum);
		fflush(stdout);
	}
	if (o.stalls) {
		char line[512];
		int n = snprintf(line, sizeof line, "stalls rank=%d", rank);
		for (int k = 0; k < NPARTS; k++)
			n += snprintf(line + n, sizeof line - (size_t)n, " %s=%ld", part_names[k], stalled[k]);
		printf("%s\n", line);
		fflush(stdout);
	}
	free(all);
	free(w.state);
	MPI_Type_free(&column);
	MPI_Type_free(&items);
	MPI_Finalize();
	return 0;
}
