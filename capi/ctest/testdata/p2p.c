/* Point to point: Send/Recv, Ssend, Rsend, Bsend with an attached buffer,
 * Isend/Irecv, Sendrecv(_replace), Probe/Iprobe and Get_count, Mprobe/Mrecv,
 * Improbe/Imrecv, Wait/Waitall/Waitany/Waitsome, Test/Testall/Testany/
 * Testsome, Request_free, Cancel of a receive, persistent requests,
 * PROC_NULL, ANY_SOURCE and ANY_TAG. Ranks pair up in a ring. */
#include "ctest.h"

static int r, s, next, prev;

static void ring_blocking(void)
{
	int v = r * 10, got = -1, count;
	MPI_Status st;
	if (r % 2 == 0) {
		MPI_Send(&v, 1, MPI_INT, next, 1, MPI_COMM_WORLD);
		MPI_Recv(&got, 1, MPI_INT, prev, 1, MPI_COMM_WORLD, &st);
	} else {
		MPI_Recv(&got, 1, MPI_INT, prev, 1, MPI_COMM_WORLD, &st);
		MPI_Send(&v, 1, MPI_INT, next, 1, MPI_COMM_WORLD);
	}
	MPI_Get_count(&st, MPI_INT, &count);
	ct_out("send/recv got %d source %d tag %d count %d", got, st.MPI_SOURCE, st.MPI_TAG, count);
	MPI_Sendrecv(&v, 1, MPI_INT, next, 2, &got, 1, MPI_INT, prev, 2, MPI_COMM_WORLD, &st);
	ct_out("sendrecv got %d source %d", got, st.MPI_SOURCE);
	got = v + 1;
	MPI_Sendrecv_replace(&got, 1, MPI_INT, next, 3, prev, 3, MPI_COMM_WORLD, &st);
	ct_out("sendrecv_replace got %d", got);
}

static void modes(void)
{
	int v = r + 100, got = -1, bsize, *buf;
	MPI_Request rq;
	void *detached;
	/* Ssend against an Irecv; Rsend after the receive is known posted */
	MPI_Irecv(&got, 1, MPI_INT, prev, 4, MPI_COMM_WORLD, &rq);
	MPI_Ssend(&v, 1, MPI_INT, next, 4, MPI_COMM_WORLD);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	ct_out("ssend got %d", got);
	MPI_Irecv(&got, 1, MPI_INT, prev, 5, MPI_COMM_WORLD, &rq);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Rsend(&v, 1, MPI_INT, next, 5, MPI_COMM_WORLD);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	ct_out("rsend got %d", got);
	MPI_Pack_size(4, MPI_INT, MPI_COMM_WORLD, &bsize);
	bsize += MPI_BSEND_OVERHEAD;
	buf = malloc(bsize);
	MPI_Buffer_attach(buf, bsize);
	{
		int four[4] = {v, v + 1, v + 2, v + 3}, in[4];
		MPI_Bsend(four, 4, MPI_INT, next, 6, MPI_COMM_WORLD);
		MPI_Recv(in, 4, MPI_INT, prev, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		ct_out("bsend got %d %d %d %d", in[0], in[1], in[2], in[3]);
	}
	MPI_Buffer_detach(&detached, &bsize);
	ct_check(detached == buf, "Buffer_detach returned another buffer");
	free(buf);
}

static void probes(void)
{
	int v[3] = {r, r * 2, r * 3}, got[3] = {0}, flag = 0, count;
	MPI_Status st;
	MPI_Message msg;
	MPI_Request rq;
	MPI_Isend(v, 3, MPI_INT, next, 7, MPI_COMM_WORLD, &rq);
	MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
	MPI_Get_count(&st, MPI_INT, &count);
	ct_out("probe source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, count);
	while (!flag)
		MPI_Iprobe(prev, 7, MPI_COMM_WORLD, &flag, &st);
	MPI_Recv(got, 3, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	ct_out("probed recv %d %d %d", got[0], got[1], got[2]);
	MPI_Isend(v, 2, MPI_INT, next, 8, MPI_COMM_WORLD, &rq);
	MPI_Mprobe(prev, 8, MPI_COMM_WORLD, &msg, &st);
	MPI_Get_count(&st, MPI_INT, &count);
	MPI_Mrecv(got, count, MPI_INT, &msg, &st);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	ct_out("mprobe count %d got %d %d null %d", count, got[0], got[1], msg == MPI_MESSAGE_NULL);
	MPI_Isend(v, 1, MPI_INT, next, 9, MPI_COMM_WORLD, &rq);
	flag = 0;
	while (!flag)
		MPI_Improbe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &flag, &msg, &st);
	{
		MPI_Request rr;
		MPI_Imrecv(got, 1, MPI_INT, &msg, &rr);
		MPI_Wait(&rr, &st);
	}
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	ct_out("improbe got %d source %d", got[0], st.MPI_SOURCE);
}

static void completions(void)
{
	enum { K = 4 };
	int out[K], in[K], i, idx, n, done = 0, flag, idxs[K], seen = 0;
	MPI_Request sq[K], rq[K];
	MPI_Status sts[K];
	for (i = 0; i < K; i++) {
		out[i] = r * 100 + i;
		MPI_Irecv(&in[i], 1, MPI_INT, prev, 20 + i, MPI_COMM_WORLD, &rq[i]);
	}
	for (i = K - 1; i >= 0; i--)
		MPI_Isend(&out[i], 1, MPI_INT, next, 20 + i, MPI_COMM_WORLD, &sq[i]);
	for (i = 0; i < 2; i++) {
		MPI_Waitany(K, rq, &idx, &sts[0]);
		ct_check(rq[idx] == MPI_REQUEST_NULL && sts[0].MPI_TAG == 20 + idx, "Waitany index %d tag %d", idx, sts[0].MPI_TAG);
		seen |= 1 << idx;
	}
	while (done < K - 2) {
		MPI_Waitsome(K, rq, &n, idxs, sts);
		ct_check(n != MPI_UNDEFINED && n > 0, "Waitsome outcount %d", n);
		for (i = 0; i < n; i++)
			seen |= 1 << idxs[i];
		done += n;
	}
	MPI_Waitsome(K, rq, &n, idxs, sts);
	ct_out("waitsome after all undefined %d seen %d", n == MPI_UNDEFINED, seen);
	flag = 0;
	while (!flag)
		MPI_Testall(K, sq, &flag, MPI_STATUSES_IGNORE);
	ct_out("recv %d %d %d %d", in[0], in[1], in[2], in[3]);
	MPI_Testany(K, sq, &idx, &flag, MPI_STATUS_IGNORE);
	ct_out("testany on nulls flag %d undefined %d", flag, idx == MPI_UNDEFINED);
	/* Testsome and Test on a fresh pair */
	MPI_Irecv(&in[0], 1, MPI_INT, prev, 30, MPI_COMM_WORLD, &rq[0]);
	MPI_Isend(&out[1], 1, MPI_INT, next, 30, MPI_COMM_WORLD, &sq[0]);
	for (n = 0; n == 0;)
		MPI_Testsome(1, rq, &n, idxs, sts);
	ct_out("testsome n %d got %d", n, in[0]);
	for (flag = 0; !flag;)
		MPI_Test(&sq[0], &flag, MPI_STATUS_IGNORE);
	/* Request_free of a send whose receive is matched later */
	MPI_Isend(&out[2], 1, MPI_INT, next, 31, MPI_COMM_WORLD, &sq[0]);
	MPI_Request_free(&sq[0]);
	MPI_Recv(&in[0], 1, MPI_INT, prev, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	ct_out("request_free null %d got %d", sq[0] == MPI_REQUEST_NULL, in[0]);
	MPI_Barrier(MPI_COMM_WORLD);
}

static void special(void)
{
	int v = 1, got = 7, cancelled = 0, count;
	MPI_Status st;
	MPI_Request rq[2];
	MPI_Send(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
	MPI_Recv(&got, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
	MPI_Get_count(&st, MPI_INT, &count);
	ct_out("proc_null got %d source_is_proc_null %d tag_is_any %d count %d", got,
	       st.MPI_SOURCE == MPI_PROC_NULL, st.MPI_TAG == MPI_ANY_TAG, count);
	MPI_Irecv(&got, 1, MPI_INT, prev, 99, MPI_COMM_WORLD, &rq[0]);
	MPI_Cancel(&rq[0]);
	MPI_Wait(&rq[0], &st);
	MPI_Test_cancelled(&st, &cancelled);
	ct_out("cancelled recv %d", cancelled);
	/* persistent requests, started three times */
	{
		int i, in = 0, out = 0;
		MPI_Send_init(&out, 1, MPI_INT, next, 40, MPI_COMM_WORLD, &rq[0]);
		MPI_Recv_init(&in, 1, MPI_INT, prev, 40, MPI_COMM_WORLD, &rq[1]);
		for (i = 0; i < 3; i++) {
			out = r * 1000 + i;
			if (i == 0) {
				MPI_Start(&rq[1]);
				MPI_Start(&rq[0]);
			} else
				MPI_Startall(2, rq);
			MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
			ct_out("persistent %d got %d", i, in);
		}
		ct_check(rq[0] != MPI_REQUEST_NULL, "a persistent request is null after Wait");
		MPI_Request_free(&rq[0]);
		MPI_Request_free(&rq[1]);
	}
}

/* Derived datatypes through every kind of call: a column of a 4x3 matrix
 * sent non-blocking and received into a strided layout completed by Test,
 * Sendrecv_replace on a vector, persistent synchronous/buffered sends,
 * Request_get_status, a type freed while its receive is pending, and
 * MPI_MESSAGE_NO_PROC. */
static void buffers(void)
{
	int m[12], got[12], i, flag = 0, count, elems, bsize, *bbuf;
	MPI_Datatype col, col2;
	MPI_Request rq[2];
	MPI_Status st;
	MPI_Message msg;
	void *detached;
	for (i = 0; i < 12; i++)
		m[i] = r * 100 + i, got[i] = -1;
	MPI_Type_vector(4, 1, 3, MPI_INT, &col);
	MPI_Type_commit(&col);
	MPI_Irecv(got, 1, col, prev, 50, MPI_COMM_WORLD, &rq[0]);
	MPI_Isend(m + 1, 1, col, next, 50, MPI_COMM_WORLD, &rq[1]);
	while (!flag)
		MPI_Test(&rq[0], &flag, &st);
	MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
	MPI_Get_count(&st, col, &count);
	MPI_Get_elements(&st, col, &elems);
	ct_out("column got %d %d %d %d %d %d count %d elements %d", got[0], got[1], got[3], got[6], got[9], got[10],
	       count, elems);
	/* three ints into a column: a partial element */
	MPI_Irecv(got, 2, col, prev, 51, MPI_COMM_WORLD, &rq[0]);
	MPI_Send(m, 3, MPI_INT, next, 51, MPI_COMM_WORLD);
	MPI_Wait(&rq[0], &st);
	MPI_Get_count(&st, col, &count);
	MPI_Get_elements(&st, col, &elems);
	ct_out("partial got %d %d %d undefined %d elements %d", got[0], got[3], got[6], count == MPI_UNDEFINED, elems);
	for (i = 0; i < 12; i++)
		got[i] = m[i];
	MPI_Sendrecv_replace(got + 2, 1, col, next, 52, prev, 52, MPI_COMM_WORLD, &st);
	ct_out("replace %d %d %d %d keeps %d %d", got[2], got[5], got[8], got[11], got[0], got[1]);
	/* a type freed while a receive through it is pending still works */
	MPI_Type_dup(col, &col2);
	MPI_Irecv(got, 1, col2, prev, 53, MPI_COMM_WORLD, &rq[0]);
	MPI_Type_free(&col2);
	MPI_Request_get_status(rq[0], &flag, MPI_STATUS_IGNORE);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Send(m + 2, 1, col, next, 53, MPI_COMM_WORLD);
	for (flag = 0; !flag;)
		MPI_Request_get_status(rq[0], &flag, &st);
	ct_check(rq[0] != MPI_REQUEST_NULL, "Request_get_status freed the request");
	MPI_Wait(&rq[0], &st);
	ct_out("freed type got %d %d %d %d source %d", got[0], got[3], got[6], got[9], st.MPI_SOURCE);
	/* persistent synchronous and buffered sends of the column */
	MPI_Pack_size(1, col, MPI_COMM_WORLD, &bsize);
	bsize = 2 * (bsize + MPI_BSEND_OVERHEAD); /* a received message's room may not be free yet */
	bbuf = malloc(bsize);
	MPI_Buffer_attach(bbuf, bsize);
	MPI_Ssend_init(m, 1, col, next, 54, MPI_COMM_WORLD, &rq[0]);
	MPI_Bsend_init(m + 1, 1, col, next, 55, MPI_COMM_WORLD, &rq[1]);
	for (i = 0; i < 2; i++) {
		int in[8];
		m[0] = r * 100 + 10 * i, m[1] = m[0] + 1;
		MPI_Startall(2, rq);
		MPI_Recv(in, 4, MPI_INT, prev, 54, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Recv(in + 4, 4, MPI_INT, prev, 55, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
		ct_out("persistent modes %d: %d %d %d %d / %d %d %d %d", i, in[0], in[1], in[2], in[3], in[4], in[5], in[6],
		       in[7]);
	}
	MPI_Request_free(&rq[0]);
	MPI_Request_free(&rq[1]);
	MPI_Ibsend(m + 2, 1, col, next, 56, MPI_COMM_WORLD, &rq[0]);
	MPI_Recv(got, 4, MPI_INT, prev, 56, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
	ct_out("ibsend got %d %d %d %d", got[0], got[1], got[2], got[3]);
	MPI_Buffer_detach(&detached, &bsize);
	ct_check(detached == bbuf, "Buffer_detach returned another buffer");
	free(bbuf);
	MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &msg, &st);
	ct_out("mprobe proc_null no_proc %d source_is_proc_null %d", msg == MPI_MESSAGE_NO_PROC,
	       st.MPI_SOURCE == MPI_PROC_NULL);
	MPI_Mrecv(got, 1, MPI_INT, &msg, &st);
	MPI_Get_count(&st, MPI_INT, &count);
	ct_out("mrecv no_proc null %d count %d", msg == MPI_MESSAGE_NULL, count);
	MPI_Type_free(&col);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	ct_begin(argc, argv);
	r = ct_rank, s = ct_size, next = (r + 1) % s, prev = (r + s - 1) % s;
	ring_blocking();
	modes();
	probes();
	completions();
	special();
	buffers();
	return ct_end();
}
