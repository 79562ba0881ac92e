/*
 * resilient.c: examples/resilient in C, with ULFM's MPIX_ calls
 * (mpi-ext.h) as a program written for Open MPI's ULFM uses them. An
 * iterative solver that loses ranks and goes on: Jacobi relaxation of a
 * 1-D field (-points, -iters), the points spread over the ranks in
 * blocks, the whole field saved in every rank's memory every -every
 * iterations. When an operation fails because a rank died, the rank that
 * saw it revokes the communicator (MPIX_Comm_revoke), so every survivor,
 * whatever it was waiting for, reaches the recovery too; the survivors
 * shrink the communicator (MPIX_Comm_shrink), spread the points over
 * those left, and go on from the last saved field. A save counts only
 * when every survivor has it: the ranks agree on that (MPIX_Comm_agree)
 * after each save. It ends by printing, from the first surviving rank,
 *
 *     resilient: done: <points> points, <iters> iterations, checksum <16 hex digits>
 *
 * the same for any number of ranks and failures, as long as one rank
 * survives. -crash-rank R -crash-at K makes world rank R kill itself
 * (SIGKILL) when it starts iteration K. Run it under gompirun with the
 * sustain error manager, which keeps the job alive after a failure:
 *
 *     gompicc -O2 -o resilient examples/c/resilient.c -lm
 *     gompirun --mca errmgr sustain,default -np 4 ./resilient -points 4096 -iters 400 -crash-rank 2 -crash-at 150
 *
 * The steps, messages and agreements are examples/resilient's, one for
 * one; the field starts from the C library's sin(), which may differ from
 * Go's math.Sin in the last bit, so compare its checksum with its own
 * failure-free run's.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct config {
	long points, iters, every, crash_rank, crash_at;
};

struct solver {
	struct config cfg;
	MPI_Comm comm;
	double *saved; /* the whole field at iteration saved_at, the same at every rank */
	long saved_at, it;
	long lo, hi;      /* this rank's points [lo, hi) */
	double *u, *next; /* its points, with a ghost point each side */
	int agreed;       /* the failure being handled came out of a save's agreement */
};

static int parse(int argc, char **argv, struct config *c)
{
	c->points = 4096, c->iters = 400, c->every = 10, c->crash_rank = -1, c->crash_at = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-' || i + 1 >= argc)
			return -1;
		a += a[1] == '-' ? 2 : 1;
		char *end;
		long v = strtol(argv[++i], &end, 10);
		if (*end != 0)
			return -1;
		if (strcmp(a, "points") == 0)
			c->points = v;
		else if (strcmp(a, "iters") == 0)
			c->iters = v;
		else if (strcmp(a, "every") == 0)
			c->every = v;
		else if (strcmp(a, "crash-rank") == 0)
			c->crash_rank = v;
		else if (strcmp(a, "crash-at") == 0)
			c->crash_at = v;
		else
			return -1;
	}
	if (c->points < 3 || c->iters < 0 || c->every < 1 || (c->crash_rank < 0) != (c->crash_at < 0))
		return -1;
	return 0;
}

/* spread gives this rank its block of the saved field and goes back to
 * the iteration it was saved at. */
static void spread(struct solver *s)
{
	int size, r;
	MPI_Comm_size(s->comm, &size);
	MPI_Comm_rank(s->comm, &r);
	long n = s->cfg.points;
	s->lo = r * n / size, s->hi = (r + 1) * n / size;
	free(s->u), free(s->next);
	s->u = calloc(s->hi - s->lo + 2, sizeof(double));
	s->next = calloc(s->hi - s->lo + 2, sizeof(double));
	memcpy(s->u + 1, s->saved + s->lo, (s->hi - s->lo) * sizeof(double));
	s->it = s->saved_at;
}

/* exchange fills the ghost points from the neighbours' blocks. */
static int exchange(struct solver *s)
{
	int r, size, rc;
	long m = s->hi - s->lo;
	MPI_Comm_rank(s->comm, &r);
	MPI_Comm_size(s->comm, &size);
	int left = r - 1 < 0 ? MPI_PROC_NULL : r - 1, right = r + 1 >= size ? MPI_PROC_NULL : r + 1;
	rc = MPI_Sendrecv(s->u + 1, 1, MPI_DOUBLE, left, 0, s->u + m + 1, 1, MPI_DOUBLE, right, 0, s->comm, MPI_STATUS_IGNORE);
	if (rc != MPI_SUCCESS)
		return rc;
	return MPI_Sendrecv(s->u + m, 1, MPI_DOUBLE, right, 1, s->u, 1, MPI_DOUBLE, left, 1, s->comm, MPI_STATUS_IGNORE);
}

/* save gathers the field into every rank's memory, then the ranks agree
 * whether every one of them has it: only then is it where a recovery
 * starts. Every rank takes part in the agreement whatever the gather gave
 * it, so none waits in it for a rank gone to recover; a rank whose gather
 * failed revokes first, so none is left waiting in the gather. */
static int save(struct solver *s)
{
	int size;
	long n = s->cfg.points;
	MPI_Comm_size(s->comm, &size);
	int *counts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int));
	for (int j = 0; j < size; j++) {
		long lo = j * n / size, hi = (j + 1) * n / size;
		counts[j] = (int)(hi - lo), displs[j] = (int)lo;
	}
	double *recv = malloc(n * sizeof(double));
	int gerr = MPI_Allgatherv(s->u + 1, (int)(s->hi - s->lo), MPI_DOUBLE, recv, counts, displs, MPI_DOUBLE, s->comm);
	int ok = 1;
	if (gerr != MPI_SUCCESS) {
		ok = 0;
		MPIX_Comm_revoke(s->comm);
	}
	int rc = MPIX_Comm_agree(s->comm, &ok);
	s->agreed = 1;
	if (rc == MPI_SUCCESS && ok != 1)
		rc = gerr != MPI_SUCCESS ? gerr : MPIX_ERR_REVOKED; /* another rank could not save */
	if (rc == MPI_SUCCESS) {
		memcpy(s->saved, recv, n * sizeof(double));
		s->saved_at = s->it;
	}
	free(counts), free(displs), free(recv);
	return rc;
}

/* step runs one iteration and saves the field when it is time to. */
static int step(struct solver *s)
{
	int rc = exchange(s);
	if (rc != MPI_SUCCESS)
		return rc;
	long m = s->hi - s->lo;
	for (long i = 1; i <= m; i++) {
		long g = s->lo + i - 1;
		s->next[i] = g == 0 || g == s->cfg.points - 1 ? s->u[i] : 0.5 * (s->u[i - 1] + s->u[i + 1]);
	}
	double *t = s->u;
	s->u = s->next, s->next = t;
	s->it++;
	if (s->it % s->cfg.every == 0 || s->it == s->cfg.iters)
		return save(s);
	return MPI_SUCCESS;
}

/* recover handles a failure: revoke (so that every survivor learns of it,
 * whatever it waits for), shrink, spread the saved field over the
 * survivors and go back to where it was saved. A rank that has not yet
 * taken part in this iteration's agreement does first, voting no: another
 * survivor may be waiting in it. */
static int recover(struct solver *s, int cause)
{
	int cls, rc;
	MPI_Error_class(cause, &cls);
	if (cls != MPIX_ERR_PROC_FAILED && cls != MPIX_ERR_REVOKED)
		return cause;
	MPI_Comm old = s->comm, nc;
	if ((rc = MPIX_Comm_revoke(old)) != MPI_SUCCESS)
		return rc;
	if (!s->agreed) {
		int no = 0;
		rc = MPIX_Comm_agree(old, &no);
		MPI_Error_class(rc, &cls);
		if (rc != MPI_SUCCESS && cls != MPIX_ERR_PROC_FAILED)
			return rc;
	}
	s->agreed = 0;
	if ((rc = MPIX_Comm_shrink(old, &nc)) != MPI_SUCCESS)
		return rc;
	MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
	MPI_Group failed, world;
	int nf;
	MPIX_Comm_get_failed(old, &failed);
	MPI_Group_size(failed, &nf);
	int *in = malloc((nf + 1) * sizeof(int)), *lost = malloc((nf + 1) * sizeof(int));
	for (int i = 0; i < nf; i++)
		in[i] = i;
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	MPI_Group_translate_ranks(failed, nf, in, world, lost);
	if (old != MPI_COMM_WORLD)
		MPI_Comm_free(&old);
	s->comm = nc;
	int r, size;
	MPI_Comm_rank(nc, &r);
	MPI_Comm_size(nc, &size);
	if (r == 0) {
		char why[MPI_MAX_ERROR_STRING];
		int len;
		MPI_Error_string(cause, why, &len);
		printf("resilient: failure at iteration %ld (%s): %d ranks left (lost world ranks [", s->it, why, size);
		for (int i = 0; i < nf; i++)
			printf(i ? " %d" : "%d", lost[i]);
		printf("]); going on from iteration %ld\n", s->saved_at);
		fflush(stdout);
	}
	MPI_Group_free(&failed), MPI_Group_free(&world);
	free(in), free(lost);
	spread(s);
	return MPI_SUCCESS;
}

static uint64_t checksum(const double *f, long n)
{
	uint64_t h = 14695981039346656037ULL;
	for (long i = 0; i < n; i++) {
		uint64_t u;
		memcpy(&u, &f[i], sizeof u);
		for (int k = 0; k < 8; k++) {
			h ^= (uint8_t)(u >> (8 * k));
			h *= 1099511628211ULL;
		}
	}
	return h;
}

int main(int argc, char **argv)
{
	struct solver s;
	int rank, rc = MPI_SUCCESS;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	memset(&s, 0, sizeof s);
	if (parse(argc, argv, &s.cfg) != 0) {
		if (rank == 0)
			fprintf(stderr, "usage: resilient [-points N>=3] [-iters I] [-every K>=1] [-crash-rank R -crash-at K]\n");
		MPI_Finalize();
		return 2;
	}
	/* Errors come back as codes: the program handles them. */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	s.comm = MPI_COMM_WORLD;
	long n = s.cfg.points;
	s.saved = malloc(n * sizeof(double));
	for (long i = 0; i < n; i++)
		s.saved[i] = sin(M_PI * (double)i / (double)(n - 1));
	s.saved[0] = 1, s.saved[n - 1] = 0;
	spread(&s);
	while (s.it < s.cfg.iters) {
		if (s.it == s.cfg.crash_at && rank == s.cfg.crash_rank) {
			printf("resilient: rank %d crashing (-crash-at)\n", rank);
			fflush(stdout);
			kill(getpid(), SIGKILL);
			pause(); /* the signal is on its way */
		}
		s.agreed = 0;
		if ((rc = step(&s)) != MPI_SUCCESS && (rc = recover(&s, rc)) != MPI_SUCCESS)
			break;
	}
	int r;
	MPI_Comm_rank(s.comm, &r);
	if (rc == MPI_SUCCESS && r == 0) {
		printf("resilient: done: %ld points, %ld iterations, checksum %016llx\n", s.cfg.points, s.cfg.iters,
		       (unsigned long long)checksum(s.saved, n));
		fflush(stdout);
	}
	if (rc != MPI_SUCCESS) {
		char why[MPI_MAX_ERROR_STRING];
		int len;
		MPI_Error_string(rc, why, &len);
		fprintf(stderr, "resilient: %s\n", why);
	}
	if (s.comm != MPI_COMM_WORLD)
		MPI_Comm_free(&s.comm);
	free(s.saved), free(s.u), free(s.next);
	MPI_Finalize();
	return rc == MPI_SUCCESS ? 0 : 1;
}
