/*
 * heat_cr.c: heat.c made restartable with gompi_cr.h, gompi's
 * application-level checkpoint/restart API for C. The same solver, flags
 * and output (the same checksum line as heat.c and examples/heat for the
 * same flags), plus:
 *
 *   - its state is protected: the grid (the rank's rows, in place) and a
 *     struct holding the step, the residual and the MPI handles the solver
 *     uses, a communicator from MPI_Comm_dup, one from MPI_Comm_split and
 *     a derived datatype (a row), which after a restart are the restored
 *     struct's values, used as they are;
 *   - a safe point at the top of every step, where gompi-checkpoint saves
 *     it;
 *   - -ckpt-at K: the program asks for a checkpoint itself at step K,
 *     named "step-K" (GOMPI_CR_Checkpoint); with -ckpt-term 1 the job
 *     ends there once saved (GOMPI_CR_TERM);
 *   - -wait-ckpt K: at step K rank 0 prints "heat_cr: waiting for a
 *     checkpoint at step K" and waits, before its safe point, until one is
 *     requested (GOMPI_CR_Need_checkpoint; the others wait for it in the
 *     halo exchange), which the job then takes at step K or K+1; unless
 *     restarted, it then stops at step K+2 until the job is ended: a
 *     test's checkpoint from outside always finds the job running, and
 *     the job never finishes before the test ends it;
 *   - -hold-at K -hold-file PATH: at step K rank 0 prints "heat_cr:
 *     holding at step K" and waits while PATH exists (crs=criu saves the
 *     job there, anywhere, and the restored rank goes on once the test
 *     removed the file);
 *   - callbacks: at each checkpoint rank 0 writes progress.txt (the step)
 *     into its snapshot; on a restart it reads it back and prints
 *
 *         heat_cr: restarted from <ref> seq <n> (<name>) at step <K>
 *
 * Run it with C/R on (a program calling gompi_cr.h gets crs=self), save it
 * from outside, end it, and restart it, on the same or another layout:
 *
 *     gompicc -O2 -o heat_cr examples/c/heat_cr.c
 *     gompirun -am ft-enable-cr -np 4 ./heat_cr -size 512 -steps 5000 -every 100
 *     gompi-checkpoint --term <gompirun's pid>
 *     gompi-restart --mca btl tcp <the reference it printed>
 */
#include <mpi.h>
#include <gompi_cr.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HOT 100.0

struct options {
	long size, steps, every, ckpt_at, ckpt_term, wait_ckpt, hold_at;
	double sleep_s;
	const char *hold_file;
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
	o->size = 256, o->steps = 500, o->every = 0, o->ckpt_at = 0, o->ckpt_term = 0, o->wait_ckpt = 0, o->hold_at = 0, o->sleep_s = 0;
	o->hold_file = NULL;
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
		if (strcmp(name, "hold-file") == 0) {
			o->hold_file = val;
			continue;
		}
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
		else if (strcmp(name, "ckpt-at") == 0)
			o->ckpt_at = v;
		else if (strcmp(name, "ckpt-term") == 0)
			o->ckpt_term = v;
		else if (strcmp(name, "wait-ckpt") == 0)
			o->wait_ckpt = v;
		else if (strcmp(name, "hold-at") == 0)
			o->hold_at = v;
		else
			return -1;
	}
	if (o->size < 1 || o->steps < 0 || o->every < 0 || o->ckpt_at < 0 || o->wait_ckpt < 0 || (o->hold_at > 0) != (o->hold_file != NULL))
		return -2;
	return 0;
}

struct slab {
	int N, n, r, rows, cols;
	double *cur, *next;
	MPI_Comm halo;        /* a dup of MPI_COMM_WORLD (the protected state's) */
	MPI_Datatype row;     /* one row of cols doubles (the protected state's) */
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
		MPI_Irecv(s->cur, 1, s->row, up, 0, s->halo, &reqs[nreq++]);
		MPI_Isend(s->cur + cols, 1, s->row, up, 1, s->halo, &reqs[nreq++]);
	}
	if (down < s->n) {
		MPI_Irecv(s->cur + (size_t)(s->rows + 1) * cols, 1, s->row, down, 1, s->halo, &reqs[nreq++]);
		MPI_Isend(s->cur + (size_t)s->rows * cols, 1, s->row, down, 0, s->halo, &reqs[nreq++]);
	}
	return MPI_Waitall(nreq, reqs, MPI_STATUSES_IGNORE);
}

/* relax computes next from cur, copies it back into cur (which stays
 * where GOMPI_CR_Protect registered it), and returns the largest change. */
static double relax(struct slab *s)
{
	double *cur = s->cur, *next = s->next, local = 0;
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
	for (i = 1; i <= s->rows; i++)
		memcpy(cur + (size_t)i * cols + 1, next + (size_t)i * cols + 1, s->N * sizeof(double));
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

/* state is what describes the run's progress besides the grid: saved and
 * restored whole, handles included. */
struct state {
	long step;        /* the next step to run */
	double residual;  /* the last step's */
	MPI_Comm halo;    /* MPI_Comm_dup(MPI_COMM_WORLD): halo exchange */
	MPI_Comm all;     /* MPI_Comm_split(MPI_COMM_WORLD, 0, rank): Allreduce, Gatherv */
	MPI_Datatype row; /* MPI_Type_contiguous(N + 2, MPI_DOUBLE) */
};

/* finish gathers the interior on rank 0 and prints the summary and checksum. */
static int finish(struct slab *s, MPI_Comm all, long steps, double residual)
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
	err = MPI_Gatherv(interior, s->rows * s->N, MPI_DOUBLE, grid, counts, displs, MPI_DOUBLE, 0, all);
	if (err == MPI_SUCCESS && s->r == 0) {
		printf("heat: %dx%d grid, %ld steps, ranks: %d, residual %.6e\n", s->N, s->N, steps, s->n, residual);
		printf("checksum: %016llx\n", (unsigned long long)fnv1a(grid, (size_t)s->N * s->N));
		fflush(stdout);
	}
	free(interior), free(grid), free(counts), free(displs);
	return err;
}

/* The callbacks: rank 0 keeps the step of each checkpoint beside the
 * protected state, in a file of its own, and checks it on a restart. */
static int save_progress(const char *dir, void *arg)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/progress.txt", dir);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return 1;
	fprintf(f, "%ld\n", ((struct state *)arg)->step);
	return fclose(f) != 0;
}

static long restored_step = -1;

static int load_progress(const char *dir, void *arg)
{
	char path[4096];
	(void)arg;
	snprintf(path, sizeof path, "%s/progress.txt", dir);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return 1;
	int ok = fscanf(f, "%ld", &restored_step) == 1;
	fclose(f);
	return !ok;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "heat_cr: %s: error %d\n", what, rc);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

/* protect builds the handles and registers the state: on a restart the
 * handles just made are replaced by the saved ones, which must be equal. */
static void protect(struct state *st, struct slab *s, int rank)
{
	int rc;
	MPI_Comm_dup(MPI_COMM_WORLD, &st->halo);
	MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &st->all);
	MPI_Type_contiguous(s->cols, MPI_DOUBLE, &st->row);
	MPI_Type_commit(&st->row);
	st->step = 1;
	if ((rc = GOMPI_CR_Protect("state", st, sizeof *st)) != MPI_SUCCESS)
		die("protect the state", rc);
	if ((rc = GOMPI_CR_Protect("grid", s->cur, (size_t)(s->rows + 2) * s->cols * sizeof(double))) != MPI_SUCCESS)
		die("protect the grid", rc);
	s->halo = st->halo, s->row = st->row;
	if (rank != 0)
		return;
	if ((rc = GOMPI_CR_On_checkpoint(save_progress, st)) != MPI_SUCCESS || (rc = GOMPI_CR_On_restart(load_progress, NULL)) != MPI_SUCCESS)
		die("register the callbacks", rc);
	int restarted = 0, seq = -1;
	char ref[4096], name[256];
	GOMPI_CR_Is_restart(&restarted);
	if (restarted && GOMPI_CR_Restart_info(ref, sizeof ref, &seq, name, sizeof name) == MPI_SUCCESS) {
		if (restored_step != st->step)
			fprintf(stderr, "heat_cr: progress.txt says step %ld, the state %ld\n", restored_step, st->step);
		printf("heat_cr: restarted from %s seq %d (%s) at step %ld\n", ref, seq, name[0] ? name : "gompi-checkpoint", st->step);
		fflush(stdout);
	}
}

/* wait_checkpoint waits until the job's coordinator wants the rank at a
 * safe point (on a restart, at once until the restart point is passed). */
static void wait_checkpoint(long step)
{
	int need = 0;
	printf("heat_cr: waiting for a checkpoint at step %ld\n", step);
	fflush(stdout);
	for (;;) {
		int rc = GOMPI_CR_Need_checkpoint(&need);
		if (rc != MPI_SUCCESS)
			die("need checkpoint", rc);
		if (need)
			return;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
}

/* hold waits while path exists. */
static void hold(long step, const char *path)
{
	printf("heat_cr: holding at step %ld\n", step);
	fflush(stdout);
	while (access(path, F_OK) == 0) {
		struct timespec ts = {0, 10000000};
		nanosleep(&ts, NULL);
	}
}

int main(int argc, char **argv)
{
	struct options o;
	struct slab s;
	struct state st;
	int rank, size, rc;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	rc = parse_args(argc, argv, &o);
	if (rc != 0) {
		if (rank == 0)
			fprintf(stderr, rc == -2 ? "heat_cr: -size must be >= 1, -steps, -every and -ckpt-at >= 0\n"
			                         : "usage: heat_cr [-size N] [-steps S] [-every K] [-sleep DURATION] [-ckpt-at K [-ckpt-term 1]] [-wait-ckpt K] [-hold-at K -hold-file PATH]\n");
		MPI_Finalize();
		return 2;
	}
	if (o.size < size) {
		if (rank == 0)
			fprintf(stderr, "heat_cr: -size %ld is smaller than the %d ranks: every rank needs a row\n", o.size, size);
		MPI_Finalize();
		return 1;
	}
	if (slab_init(&s, (int)o.size, size, rank) != 0) {
		fprintf(stderr, "heat_cr: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	memset(&st, 0, sizeof st);
	protect(&st, &s, rank);
	int restarted = 0;
	GOMPI_CR_Is_restart(&restarted);
	for (; st.step <= o.steps; st.step++) {
		double res;
		if (rank == 0 && st.step == o.wait_ckpt)
			wait_checkpoint(st.step);
		if (rank == 0 && st.step == o.hold_at)
			hold(st.step, o.hold_file);
		if (st.step == o.ckpt_at) {
			char name[64], ref[4096];
			int seq;
			snprintf(name, sizeof name, "step-%ld", st.step);
			if ((rc = GOMPI_CR_Checkpoint(name, o.ckpt_term ? GOMPI_CR_TERM : 0, ref, sizeof ref, &seq)) != MPI_SUCCESS)
				die("checkpoint", rc);
			if (rank == 0) {
				printf("heat_cr: checkpoint %s: %s seq %d\n", name, ref, seq);
				fflush(stdout);
			}
		} else if ((rc = GOMPI_CR_Safe_point()) != MPI_SUCCESS)
			die("safe point", rc);
		if (rank == 0 && o.wait_ckpt > 0 && st.step == o.wait_ckpt + 2 && !restarted)
			for (;;)
				pause(); /* until the job is ended */
		if ((rc = exchange_halos(&s)) != MPI_SUCCESS)
			die("halo exchange", rc);
		res = relax(&s);
		if ((rc = MPI_Allreduce(MPI_IN_PLACE, &res, 1, MPI_DOUBLE, MPI_MAX, st.all)) != MPI_SUCCESS)
			die("allreduce", rc);
		st.residual = res;
		if (rank == 0 && o.every > 0 && st.step % o.every == 0) {
			printf("step %ld: residual %.6e\n", st.step, st.residual);
			fflush(stdout);
		}
		if (o.sleep_s > 0) {
			struct timespec ts = {(time_t)o.sleep_s, (long)((o.sleep_s - (time_t)o.sleep_s) * 1e9)};
			nanosleep(&ts, NULL);
		}
	}
	rc = finish(&s, st.all, o.steps, st.residual);
	MPI_Type_free(&st.row);
	MPI_Comm_free(&st.all);
	MPI_Comm_free(&st.halo);
	free(s.cur), free(s.next);
	MPI_Finalize();
	return rc == MPI_SUCCESS ? 0 : 1;
}
