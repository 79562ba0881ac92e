/*
 * ulfm.c: ULFM's MPIX_ calls from C, for capi/ctest's TestULFM. Written as
 * a ULFM program for Open MPI is: mpi-ext.h and its feature macro.
 *
 *   ulfm revoke DIR   3+ ranks: ranks 1.. block in a receive on a dup of
 *                     MPI_COMM_WORLD; rank 0 revokes it once they are
 *                     blocked: each receive fails with MPIX_ERR_REVOKED;
 *                     then shrink of the revoked communicator works.
 *   ulfm kill DIR     4 ranks: the last writes DIR/pid and blocks; the
 *                     test kills it (SIGKILL). The others: agree fails
 *                     with MPIX_ERR_PROC_FAILED; rank 0's AnySource Irecv
 *                     waits with MPIX_ERR_PROC_FAILED_PENDING and a
 *                     blocking AnySource receive fails, until the failure
 *                     is acknowledged: then the same Irecv completes;
 *                     agree succeeds, shrink gives 3 ranks that go on.
 *
 * Each rank prints "rank R: ..." lines on standard output; "FAIL" lines
 * are its own checks failing.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if !defined(OMPI_HAVE_MPI_EXT_FTMPI) || !defined(MPIX_FT)
#error "ULFM's extension is missing"
#endif

static int rank;

static const char *cls(int rc) {
	static char s[MPI_MAX_ERROR_STRING];
	int c, n;
	MPI_Error_class(rc, &c);
	MPI_Error_string(c, s, &n);
	switch (c) {
	case MPI_SUCCESS: return "MPI_SUCCESS";
	case MPIX_ERR_PROC_FAILED: return "MPIX_ERR_PROC_FAILED";
	case MPIX_ERR_PROC_FAILED_PENDING: return "MPIX_ERR_PROC_FAILED_PENDING";
	case MPIX_ERR_REVOKED: return "MPIX_ERR_REVOKED";
	}
	return s;
}

#define SAY(...) (printf("rank %d: ", rank), printf(__VA_ARGS__), printf("\n"), fflush(stdout))
#define EXPECT(rc, want, what)                                                                   \
	do {                                                                                       \
		int c_, rc_ = (rc);                                                                \
		MPI_Error_class(rc_, &c_);                                                         \
		if (c_ != (want)) SAY("FAIL %s: %s, want %s", what, cls(rc_), #want);              \
		else SAY("%s: %s", what, cls(rc_));                                                \
	} while (0)

static void revoke_case(void) {
	MPI_Comm c;
	int size, buf = 0, flag = -1, one = 1;
	MPI_Comm_dup(MPI_COMM_WORLD, &c);
	MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
	MPI_Comm_size(c, &size);
	if (rank == 0) {
		/* each other rank says it is about to block, on the world */
		for (int i = 1; i < size; i++) MPI_Recv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		EXPECT(MPIX_Comm_revoke(c), MPI_SUCCESS, "revoke");
	} else {
		MPI_Request r;
		MPI_Irecv(&buf, 1, MPI_INT, 0, 7, c, &r); /* never sent */
		MPI_Send(&one, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
		EXPECT(MPI_Wait(&r, MPI_STATUS_IGNORE), MPIX_ERR_REVOKED, "blocked receive");
		EXPECT(MPI_Recv(&buf, 1, MPI_INT, 0, 7, c, MPI_STATUS_IGNORE), MPIX_ERR_REVOKED, "receive after");
	}
	MPIX_Comm_is_revoked(c, &flag);
	SAY("is_revoked %d", flag);
	EXPECT(MPI_Barrier(c), MPIX_ERR_REVOKED, "barrier on revoked");
	MPI_Comm s;
	EXPECT(MPIX_Comm_shrink(c, &s), MPI_SUCCESS, "shrink revoked");
	int n, sum = 0;
	MPI_Comm_size(s, &n);
	MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, s);
	SAY("shrunk size %d sum %d", n, sum);
	MPIX_Comm_is_revoked(s, &flag);
	SAY("shrunk is_revoked %d", flag);
	MPI_Comm_free(&s);
	MPI_Comm_free(&c);
}

static void kill_case(const char *dir) {
	int size, buf = -1, one = 1, rc;
	MPI_Comm w = MPI_COMM_WORLD;
	MPI_Comm_set_errhandler(w, MPI_ERRORS_RETURN);
	MPI_Comm_size(w, &size);
	int victim = size - 1;
	MPI_Barrier(w);
	if (rank == victim) {
		char path[4096], tmp[4096];
		snprintf(path, sizeof path, "%s/pid", dir);
		snprintf(tmp, sizeof tmp, "%s/.pid", dir);
		FILE *f = fopen(tmp, "w");
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
		rename(tmp, path);
		MPI_Recv(&buf, 1, MPI_INT, 0, 99, w, MPI_STATUS_IGNORE); /* killed in it */
		SAY("FAIL the victim went on");
		return;
	}
	/* The agreement cannot end before the victim's failure is known. */
	int flag = rank == 0 ? 0x3 : 0x7;
	rc = MPIX_Comm_agree(w, &flag);
	EXPECT(rc, MPIX_ERR_PROC_FAILED, "agree with a failure");
	SAY("agreed flag %#x", flag);
	MPI_Group failed, wg;
	MPIX_Comm_get_failed(w, &failed);
	int nf, wr = -1, zero = 0;
	MPI_Group_size(failed, &nf);
	MPI_Comm_group(w, &wg);
	if (nf > 0) MPI_Group_translate_ranks(failed, 1, &zero, wg, &wr);
	SAY("failed %d: rank %d", nf, wr);
	if (rank == 0) {
		MPI_Request r;
		MPI_Status st;
		int done = -1;
		MPI_Irecv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, 5, w, &r);
		EXPECT(MPI_Wait(&r, &st), MPIX_ERR_PROC_FAILED_PENDING, "anysource wait");
		EXPECT(MPI_Test(&r, &done, &st), MPIX_ERR_PROC_FAILED_PENDING, "anysource test");
		SAY("test flag %d active %d", done, r != MPI_REQUEST_NULL);
		EXPECT(MPI_Recv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, 6, w, MPI_STATUS_IGNORE), MPIX_ERR_PROC_FAILED,
		       "blocking anysource receive");
		int acked = -1;
		MPI_Group ag;
		MPIX_Comm_failure_get_acked(w, &ag);
		MPI_Group_size(ag, &nf);
		SAY("acked before %d", nf);
		EXPECT(MPIX_Comm_ack_failed(w, 1, &acked), MPI_SUCCESS, "ack_failed");
		SAY("acked %d", acked);
		MPIX_Comm_failure_get_acked(w, &ag);
		MPI_Group_size(ag, &nf);
		SAY("acked group %d", nf);
		MPI_Send(&one, 1, MPI_INT, 1, 4, w); /* rank 1: send now */
		EXPECT(MPI_Wait(&r, &st), MPI_SUCCESS, "anysource wait after ack");
		SAY("received %d from %d", buf, st.MPI_SOURCE);
	} else {
		EXPECT(MPIX_Comm_failure_ack(w), MPI_SUCCESS, "failure_ack");
		if (rank == 1) {
			int seven = 7;
			MPI_Recv(&buf, 1, MPI_INT, 0, 4, w, MPI_STATUS_IGNORE);
			MPI_Send(&seven, 1, MPI_INT, 0, 5, w);
		}
	}
	flag = 1;
	EXPECT(MPIX_Comm_agree(w, &flag), MPI_SUCCESS, "agree after ack");
	MPI_Request ar;
	flag = rank == 0 ? 0x6 : 0xe;
	MPIX_Comm_iagree(w, &flag, &ar);
	EXPECT(MPI_Wait(&ar, MPI_STATUS_IGNORE), MPI_SUCCESS, "iagree");
	SAY("iagreed flag %#x", flag);
	MPI_Comm s;
	MPI_Request sr;
	EXPECT(MPIX_Comm_ishrink(w, &s, &sr), MPI_SUCCESS, "ishrink");
	EXPECT(MPI_Wait(&sr, MPI_STATUS_IGNORE), MPI_SUCCESS, "ishrink wait");
	int n, sr_rank, sum = 0;
	MPI_Comm_size(s, &n);
	MPI_Comm_rank(s, &sr_rank);
	MPI_Allreduce(&sr_rank, &sum, 1, MPI_INT, MPI_SUM, s);
	SAY("shrunk size %d sum %d", n, sum);
	MPI_Comm_free(&s);
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	int ft = 0, *v, flag = 0;
	MPI_Comm_get_attr(MPI_COMM_WORLD, MPIX_FT, &v, &flag);
	if (flag) ft = *v;
	SAY("MPIX_FT %d", ft);
	if (argc > 2 && strcmp(argv[1], "revoke") == 0)
		revoke_case();
	else if (argc > 2 && strcmp(argv[1], "kill") == 0)
		kill_case(argv[2]);
	else {
		SAY("FAIL usage: ulfm revoke|kill DIR");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	SAY("done");
	MPI_Finalize();
	return 0;
}
