/*
 * p2p.c: point-to-point calls and requests. Arguments are checked here;
 * the operations are package mpi's (p2p.go).
 */
#include "_cgo_export.h"
#include "gompi.h"
#include <sched.h>
#include <time.h>

/* ---- Waiting --------------------------------------------------------------- */

/* How long a wait entered from C polls before it parks in Go. The reader
 * goroutines that complete requests run on another thread; a request
 * tested from C, the thread yielding between looks, is seen complete as
 * soon as they are done, where a thread parked in Go takes a futex
 * wake-up and a hand-off of its Go processor (tens of µs) to go on. */
#define POLL_NS 50000

static int64_t now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* gompi_wait_request completes the request *h: polled for up to POLL_NS, then
 * waited for in Go. */
int gompi_wait_request(uintptr_t *h, MPI_Status *st) {
	int64_t end = 0;
	for (;;) {
		int flag, rc = gompi_go_test(h, &flag, st);
		if (flag || rc != MPI_SUCCESS) return rc;
		int64_t t = now_ns();
		if (end == 0)
			end = t + POLL_NS;
		else if (t > end)
			return gompi_go_wait(h, st);
		sched_yield();
	}
}

/* check_buf checks a (count, datatype) buffer description; the datatype
 * itself is Go's to know (datatype.go). */
static int check_buf(MPI_Count count, MPI_Datatype t) {
	if (count < 0) return MPI_ERR_COUNT;
	return t == MPI_DATATYPE_NULL ? MPI_ERR_TYPE : MPI_SUCCESS;
}

/* check_peer checks a destination or source rank of comm: a rank of comm,
 * MPI_PROC_NULL, or (when wild) MPI_ANY_SOURCE. */
static int check_peer(MPI_Comm comm, int rank, int wild) {
	int size, remote = gompi_comm_remote_size(comm);
	if (remote < 0 || comm == MPI_COMM_NULL) return MPI_ERR_COMM;
	PMPI_Comm_size(comm, &size);
	if (remote > 0) size = remote; /* an intercommunicator's peers are remote */
	if (rank == MPI_PROC_NULL || (wild && rank == MPI_ANY_SOURCE)) return MPI_SUCCESS;
	return rank >= 0 && rank < size ? MPI_SUCCESS : MPI_ERR_RANK;
}

static int check_tag(int tag, int wild) {
	return tag >= 0 || (wild && tag == MPI_ANY_TAG) ? MPI_SUCCESS : MPI_ERR_TAG;
}

/* Send modes (p2p.go) */
enum { STANDARD, SYNC, READY, BUFFERED };

static int send_mode(const void *buf, MPI_Count count, MPI_Datatype t, int dest, int tag, MPI_Comm comm, int mode,
		     const char *fn) {
	int rc = gompi_check_init(fn);
	if ((rc = check_buf(count, t)) || (rc = check_peer(comm, dest, 0)) || (rc = check_tag(tag, 0)))
		return gompi_error(comm, rc, fn);
	if (dest == MPI_PROC_NULL) return MPI_SUCCESS;
	if (mode == STANDARD || mode == BUFFERED)
		return gompi_error(comm, gompi_go_send((uintptr_t)comm, (void *)buf, count, (uintptr_t)t, dest, tag, mode), fn);
	/* the modes that wait for the receiver: waited for as MPI_Wait does */
	uintptr_t h;
	if ((rc = gompi_go_isend((uintptr_t)comm, (void *)buf, count, (uintptr_t)t, dest, tag, mode, &h)) == MPI_SUCCESS)
		rc = gompi_wait_request(&h, MPI_STATUS_IGNORE);
	return gompi_error(comm, rc, fn);
}

static int send(const void *buf, MPI_Count count, MPI_Datatype t, int dest, int tag, MPI_Comm comm, const char *fn) {
	return send_mode(buf, count, t, dest, tag, comm, STANDARD, fn);
}

int PMPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
	return send_mode(buf, count, datatype, dest, tag, comm, BUFFERED, "MPI_Bsend");
}

int PMPI_Bsend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
	return send_mode(buf, count, datatype, dest, tag, comm, BUFFERED, "MPI_Bsend_c");
}

int PMPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
	return send_mode(buf, count, datatype, dest, tag, comm, SYNC, "MPI_Ssend");
}

int PMPI_Ssend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
	return send_mode(buf, count, datatype, dest, tag, comm, SYNC, "MPI_Ssend_c");
}

int PMPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
	return send_mode(buf, count, datatype, dest, tag, comm, READY, "MPI_Rsend");
}

int PMPI_Rsend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
	return send_mode(buf, count, datatype, dest, tag, comm, READY, "MPI_Rsend_c");
}

int PMPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
	return send(buf, count, datatype, dest, tag, comm, "MPI_Send");
}

int PMPI_Send_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
	return send(buf, count, datatype, dest, tag, comm, "MPI_Send_c");
}

/* recv_failed ends a blocking AnySource receive that a failure not yet
 * acknowledged interrupted: ULFM's blocking receive fails with
 * MPIX_ERR_PROC_FAILED and leaves nothing posted, so the receive is
 * cancelled. A message that matched it first completes it instead. */
static int recv_failed(uintptr_t *h, MPI_Status *st) {
	MPI_Status s = {0};
	gompi_go_cancel(*h);
	int rc = gompi_go_wait(h, &s);
	if (rc == MPIX_ERR_PROC_FAILED_PENDING) { /* not cancelled yet: leave it to the library */
		gompi_go_request_free(h);
		return MPIX_ERR_PROC_FAILED;
	}
	int cancelled = 0;
	if (rc == MPI_SUCCESS) PMPI_Test_cancelled(&s, &cancelled);
	if (rc != MPI_SUCCESS || cancelled) return rc != MPI_SUCCESS ? rc : MPIX_ERR_PROC_FAILED;
	if (st != MPI_STATUS_IGNORE) *st = s;
	return MPI_SUCCESS;
}

static int recv(void *buf, MPI_Count count, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Status *st, const char *fn) {
	int rc = gompi_check_init(fn);
	if ((rc = check_buf(count, t)) || (rc = check_peer(comm, src, 1)) || (rc = check_tag(tag, 1)))
		return gompi_error(comm, rc, fn);
	if (src == MPI_PROC_NULL) {
		gompi_status_set(st, MPI_PROC_NULL, MPI_ANY_TAG, 0, 0);
		return MPI_SUCCESS;
	}
	uintptr_t h;
	if ((rc = gompi_go_irecv((uintptr_t)comm, buf, count, (uintptr_t)t, src, tag, &h)) == MPI_SUCCESS)
		rc = gompi_wait_request(&h, st);
	if (rc == MPIX_ERR_PROC_FAILED_PENDING) rc = recv_failed(&h, st);
	if (rc != MPI_SUCCESS && st != MPI_STATUS_IGNORE) st->MPI_ERROR = rc;
	return gompi_error(comm, rc, fn);
}

int PMPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status) {
	return recv(buf, count, datatype, source, tag, comm, status, "MPI_Recv");
}

int PMPI_Recv_c(void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status) {
	return recv(buf, count, datatype, source, tag, comm, status, "MPI_Recv_c");
}

static int isend(const void *buf, MPI_Count count, MPI_Datatype t, int dest, int tag, MPI_Comm comm, MPI_Request *req,
		 int mode, const char *fn) {
	int rc = gompi_check_init(fn);
	if ((rc = check_buf(count, t)) || (rc = check_peer(comm, dest, 0)) || (rc = check_tag(tag, 0)))
		return gompi_error(comm, rc, fn);
	uintptr_t h;
	rc = gompi_go_isend((uintptr_t)comm, (void *)buf, count, (uintptr_t)t, dest, tag, mode, &h);
	if (rc == MPI_SUCCESS) *req = (MPI_Request)h;
	return gompi_error(comm, rc, fn);
}

int PMPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request) {
	return isend(buf, count, datatype, dest, tag, comm, request, STANDARD, "MPI_Isend");
}

int PMPI_Isend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request) {
	return isend(buf, count, datatype, dest, tag, comm, request, STANDARD, "MPI_Isend_c");
}

int PMPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request) {
	return isend(buf, count, datatype, dest, tag, comm, request, SYNC, "MPI_Issend");
}

int PMPI_Issend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
		  MPI_Request *request) {
	return isend(buf, count, datatype, dest, tag, comm, request, SYNC, "MPI_Issend_c");
}

int PMPI_Irsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request) {
	return isend(buf, count, datatype, dest, tag, comm, request, READY, "MPI_Irsend");
}

int PMPI_Irsend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
		  MPI_Request *request) {
	return isend(buf, count, datatype, dest, tag, comm, request, READY, "MPI_Irsend_c");
}

static int irecv(void *buf, MPI_Count count, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Request *req, const char *fn) {
	int rc = gompi_check_init(fn);
	if ((rc = check_buf(count, t)) || (rc = check_peer(comm, src, 1)) || (rc = check_tag(tag, 1)))
		return gompi_error(comm, rc, fn);
	uintptr_t h;
	rc = gompi_go_irecv((uintptr_t)comm, buf, count, (uintptr_t)t, src, tag, &h);
	if (rc == MPI_SUCCESS) *req = (MPI_Request)h;
	return gompi_error(comm, rc, fn);
}

int PMPI_Ibsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request) {
	return isend(buf, count, datatype, dest, tag, comm, request, BUFFERED, "MPI_Ibsend");
}

int PMPI_Ibsend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
		  MPI_Request *request) {
	return isend(buf, count, datatype, dest, tag, comm, request, BUFFERED, "MPI_Ibsend_c");
}

int PMPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request) {
	return irecv(buf, count, datatype, source, tag, comm, request, "MPI_Irecv");
}

int PMPI_Irecv_c(void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request) {
	return irecv(buf, count, datatype, source, tag, comm, request, "MPI_Irecv_c");
}

int PMPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
		  int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
	MPI_Request r;
	int rc = irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &r, "MPI_Sendrecv");
	if (rc != MPI_SUCCESS) return rc;
	if ((rc = send(sendbuf, sendcount, sendtype, dest, sendtag, comm, "MPI_Sendrecv")) != MPI_SUCCESS) return rc;
	return PMPI_Wait(&r, status);
}

/* ---- Completion ------------------------------------------------------------ */

static int known_request(MPI_Request r) {
	uintptr_t h = (uintptr_t)r;
	return r == MPI_REQUEST_NULL || (h >= GOMPI_HANDLE_BASE && GOMPI_HANDLE_KIND(h) == GOMPI_KIND_REQUEST);
}

/* gompi_err_comm is the communicator of the request whose completion
 * failed last on this thread (set by the Go side, 0 for none): its error
 * handler gets the error, so MPI_ERRORS_RETURN set there returns it, as
 * ULFM programs rely on. err_comm takes it (MPI_COMM_SELF when unset). */
__thread uintptr_t gompi_err_comm;

void gompi_set_err_comm(uintptr_t c) { gompi_err_comm = c; }

static MPI_Comm err_comm(void) {
	uintptr_t c = gompi_err_comm;
	gompi_err_comm = 0;
	return c ? (MPI_Comm)c : MPI_COMM_SELF;
}

int PMPI_Wait(MPI_Request *request, MPI_Status *status) {
	if (!known_request(*request)) return gompi_error(MPI_COMM_SELF, MPI_ERR_REQUEST, "MPI_Wait");
	uintptr_t h = (uintptr_t)*request;
	gompi_err_comm = 0;
	int rc = gompi_wait_request(&h, status);
	*request = (MPI_Request)h;
	if (rc == MPI_SUCCESS) return rc;
	if (status != MPI_STATUS_IGNORE) status->MPI_ERROR = rc;
	return gompi_error(err_comm(), rc, "MPI_Wait");
}

int PMPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
	if (!known_request(*request)) return gompi_error(MPI_COMM_SELF, MPI_ERR_REQUEST, "MPI_Test");
	uintptr_t h = (uintptr_t)*request;
	gompi_err_comm = 0;
	int rc = gompi_go_test(&h, flag, status);
	*request = (MPI_Request)h;
	return rc == MPI_SUCCESS ? rc : gompi_error(err_comm(), rc, "MPI_Test");
}

/* In the array calls a failed request's code goes to its status and the
 * call returns MPI_ERR_IN_STATUS, as the standard has it. */
int PMPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]) {
	int failed = 0;
	MPI_Comm fc = MPI_COMM_SELF; /* the first failed request's */
	for (int i = 0; i < count; i++) {
		MPI_Status s, *sp = array_of_statuses == MPI_STATUSES_IGNORE ? &s : &array_of_statuses[i];
		if (!known_request(array_of_requests[i])) return gompi_error(MPI_COMM_SELF, MPI_ERR_REQUEST, "MPI_Waitall");
		uintptr_t h = (uintptr_t)array_of_requests[i];
		gompi_err_comm = 0;
		int rc = gompi_wait_request(&h, sp);
		array_of_requests[i] = (MPI_Request)h;
		sp->MPI_ERROR = rc;
		if (rc != MPI_SUCCESS && !failed) fc = err_comm();
		failed |= rc != MPI_SUCCESS;
	}
	return failed ? gompi_error(fc, MPI_ERR_IN_STATUS, "MPI_Waitall") : MPI_SUCCESS;
}

int PMPI_Testall(int count, MPI_Request array_of_requests[], int *flag, MPI_Status array_of_statuses[]) {
	/* all or nothing: complete none unless every one has */
	for (int i = 0; i < count; i++) {
		if (!known_request(array_of_requests[i])) return gompi_error(MPI_COMM_SELF, MPI_ERR_REQUEST, "MPI_Testall");
		int done;
		uintptr_t h = (uintptr_t)array_of_requests[i];
		if (gompi_go_peek(h, &done) != MPI_SUCCESS) return gompi_error(MPI_COMM_SELF, MPI_ERR_REQUEST, "MPI_Testall");
		if (!done) {
			*flag = 0;
			return MPI_SUCCESS;
		}
	}
	*flag = 1;
	return PMPI_Waitall(count, array_of_requests, array_of_statuses);
}

int PMPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status) {
	for (int i = 0; i < count; i++)
		if (!known_request(array_of_requests[i])) return gompi_error(MPI_COMM_SELF, MPI_ERR_REQUEST, "MPI_Waitany");
	int flag, rc;
	for (int64_t end = now_ns() + POLL_NS; now_ns() < end; sched_yield())
		if ((rc = PMPI_Testany(count, array_of_requests, index, &flag, status)) != MPI_SUCCESS || flag) return rc;
	gompi_err_comm = 0;
	rc = gompi_go_waitany(count, (uintptr_t *)array_of_requests, index, status);
	return rc == MPI_SUCCESS ? rc : gompi_error(err_comm(), rc, "MPI_Waitany");
}

int PMPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag, MPI_Status *status) {
	int active = 0;
	for (int i = 0; i < count; i++) {
		if (!known_request(array_of_requests[i])) return gompi_error(MPI_COMM_SELF, MPI_ERR_REQUEST, "MPI_Testany");
		if (!gompi_go_active((uintptr_t)array_of_requests[i])) continue;
		active = 1;
		int rc = PMPI_Test(&array_of_requests[i], flag, status);
		if (rc != MPI_SUCCESS || *flag) {
			*index = i;
			return rc;
		}
	}
	*index = MPI_UNDEFINED;
	*flag = !active;
	if (!active) gompi_status_set(status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, 0);
	return MPI_SUCCESS;
}

int PMPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[],
		  MPI_Status array_of_statuses[]) {
	int active = 0, n = 0;
	for (int i = 0; i < incount; i++) {
		if (!known_request(array_of_requests[i])) return gompi_error(MPI_COMM_SELF, MPI_ERR_REQUEST, "MPI_Testsome");
		if (!gompi_go_active((uintptr_t)array_of_requests[i])) continue;
		active = 1;
		int flag;
		MPI_Status s, *sp = array_of_statuses == MPI_STATUSES_IGNORE ? &s : &array_of_statuses[n];
		uintptr_t h = (uintptr_t)array_of_requests[i];
		int rc = gompi_go_test(&h, &flag, sp);
		array_of_requests[i] = (MPI_Request)h;
		if (flag) {
			sp->MPI_ERROR = rc;
			array_of_indices[n++] = i;
		}
	}
	*outcount = active ? n : MPI_UNDEFINED;
	return MPI_SUCCESS;
}

int PMPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[],
		  MPI_Status array_of_statuses[]) {
	int index;
	MPI_Status s, *sp = array_of_statuses == MPI_STATUSES_IGNORE ? &s : &array_of_statuses[0];
	int rc = PMPI_Waitany(incount, array_of_requests, &index, sp);
	if (rc != MPI_SUCCESS) return rc;
	if (index == MPI_UNDEFINED) {
		*outcount = MPI_UNDEFINED;
		return MPI_SUCCESS;
	}
	array_of_indices[0] = index;
	int more = 0;
	/* then whatever else has completed too */
	PMPI_Testsome(incount, array_of_requests, &more, array_of_indices + 1,
		      array_of_statuses == MPI_STATUSES_IGNORE ? MPI_STATUSES_IGNORE : array_of_statuses + 1);
	*outcount = 1 + (more == MPI_UNDEFINED ? 0 : more);
	return MPI_SUCCESS;
}

int PMPI_Request_free(MPI_Request *request) {
	if (*request == MPI_REQUEST_NULL || !known_request(*request))
		return gompi_error(MPI_COMM_SELF, MPI_ERR_REQUEST, "MPI_Request_free");
	uintptr_t h = (uintptr_t)*request;
	int rc = gompi_go_request_free(&h);
	*request = (MPI_Request)h;
	return gompi_error(MPI_COMM_SELF, rc, "MPI_Request_free");
}

/* ---- Probes ------------------------------------------------------------------ */

int PMPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
	int rc = gompi_check_init("MPI_Probe");
	if ((rc = check_peer(comm, source, 1)) || (rc = check_tag(tag, 1))) return gompi_error(comm, rc, "MPI_Probe");
	if (source == MPI_PROC_NULL) {
		gompi_status_set(status, MPI_PROC_NULL, MPI_ANY_TAG, 0, 0);
		return MPI_SUCCESS;
	}
	return gompi_error(comm, gompi_go_probe((uintptr_t)comm, source, tag, status), "MPI_Probe");
}

int PMPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
	int rc = gompi_check_init("MPI_Iprobe");
	if ((rc = check_peer(comm, source, 1)) || (rc = check_tag(tag, 1))) return gompi_error(comm, rc, "MPI_Iprobe");
	if (source == MPI_PROC_NULL) {
		*flag = 1;
		gompi_status_set(status, MPI_PROC_NULL, MPI_ANY_TAG, 0, 0);
		return MPI_SUCCESS;
	}
	return gompi_error(comm, gompi_go_iprobe((uintptr_t)comm, source, tag, flag, status), "MPI_Iprobe");
}

/* ---- Persistent requests -------------------------------------------------- */

static int send_init(const void *buf, MPI_Count count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
		     MPI_Request *req, int mode, const char *fn) {
	int rc = gompi_check_init(fn);
	if ((rc = check_buf(count, t)) || (rc = check_peer(comm, dest, 0)) || (rc = check_tag(tag, 0)))
		return gompi_error(comm, rc, fn);
	uintptr_t h;
	rc = gompi_go_send_init((uintptr_t)comm, (void *)buf, count, (uintptr_t)t, dest, tag, mode, &h);
	if (rc == MPI_SUCCESS) *req = (MPI_Request)h;
	return gompi_error(comm, rc, fn);
}

int PMPI_Send_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
		MPI_Request *request) {
	return send_init(buf, count, datatype, dest, tag, comm, request, STANDARD, "MPI_Send_init");
}

int PMPI_Send_init_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
		MPI_Request *request) {
	return send_init(buf, count, datatype, dest, tag, comm, request, STANDARD, "MPI_Send_init_c");
}

int PMPI_Ssend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
		MPI_Request *request) {
	return send_init(buf, count, datatype, dest, tag, comm, request, SYNC, "MPI_Ssend_init");
}

int PMPI_Ssend_init_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
		MPI_Request *request) {
	return send_init(buf, count, datatype, dest, tag, comm, request, SYNC, "MPI_Ssend_init_c");
}

int PMPI_Rsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
		MPI_Request *request) {
	return send_init(buf, count, datatype, dest, tag, comm, request, READY, "MPI_Rsend_init");
}

int PMPI_Rsend_init_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
		MPI_Request *request) {
	return send_init(buf, count, datatype, dest, tag, comm, request, READY, "MPI_Rsend_init_c");
}

int PMPI_Bsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
		MPI_Request *request) {
	return send_init(buf, count, datatype, dest, tag, comm, request, BUFFERED, "MPI_Bsend_init");
}

int PMPI_Bsend_init_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
		MPI_Request *request) {
	return send_init(buf, count, datatype, dest, tag, comm, request, BUFFERED, "MPI_Bsend_init_c");
}


static int recv_init(void *buf, MPI_Count count, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Request *req,
		     const char *fn) {
	int rc = gompi_check_init(fn);
	if ((rc = check_buf(count, t)) || (rc = check_peer(comm, src, 1)) || (rc = check_tag(tag, 1)))
		return gompi_error(comm, rc, fn);
	uintptr_t h;
	rc = gompi_go_recv_init((uintptr_t)comm, buf, count, (uintptr_t)t, src, tag, &h);
	if (rc == MPI_SUCCESS) *req = (MPI_Request)h;
	return gompi_error(comm, rc, fn);
}

int PMPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request) {
	return recv_init(buf, count, datatype, source, tag, comm, request, "MPI_Recv_init");
}

int PMPI_Recv_init_c(void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
		     MPI_Request *request) {
	return recv_init(buf, count, datatype, source, tag, comm, request, "MPI_Recv_init_c");
}

int PMPI_Start(MPI_Request *request) {
	gompi_check_init("MPI_Start");
	if (request == NULL || !known_request(*request) || *request == MPI_REQUEST_NULL)
		return gompi_error(MPI_COMM_SELF, MPI_ERR_REQUEST, "MPI_Start");
	return gompi_error(MPI_COMM_SELF, gompi_go_start((uintptr_t)*request), "MPI_Start");
}

int PMPI_Startall(int count, MPI_Request array_of_requests[]) {
	for (int i = 0; i < count; i++) {
		int rc = PMPI_Start(&array_of_requests[i]);
		if (rc != MPI_SUCCESS) return rc;
	}
	return MPI_SUCCESS;
}

int PMPI_Cancel(MPI_Request *request) {
	gompi_check_init("MPI_Cancel");
	if (request == NULL || !known_request(*request) || *request == MPI_REQUEST_NULL)
		return gompi_error(MPI_COMM_SELF, MPI_ERR_REQUEST, "MPI_Cancel");
	return gompi_error(MPI_COMM_SELF, gompi_go_cancel((uintptr_t)*request), "MPI_Cancel");
}

int PMPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status) {
	if (!known_request(request)) return gompi_error(MPI_COMM_SELF, MPI_ERR_REQUEST, "MPI_Request_get_status");
	return gompi_error(MPI_COMM_SELF, gompi_go_request_status((uintptr_t)request, flag, status),
			   "MPI_Request_get_status");
}

/* ---- Matched probes --------------------------------------------------------- */

static int mprobe(int source, int tag, MPI_Comm comm, int block, int *flag, MPI_Message *message, MPI_Status *status,
		  const char *fn) {
	int rc = gompi_check_init(fn), f;
	if ((rc = check_peer(comm, source, 1)) || (rc = check_tag(tag, 1))) return gompi_error(comm, rc, fn);
	if (flag == NULL) flag = &f;
	if (source == MPI_PROC_NULL) {
		*flag = 1;
		*message = MPI_MESSAGE_NO_PROC;
		gompi_status_set(status, MPI_PROC_NULL, MPI_ANY_TAG, 0, 0);
		return MPI_SUCCESS;
	}
	uintptr_t h;
	rc = gompi_go_mprobe((uintptr_t)comm, source, tag, block, flag, &h, status);
	if (rc == MPI_SUCCESS && *flag) *message = (MPI_Message)h;
	return gompi_error(comm, rc, fn);
}

int PMPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status) {
	return mprobe(source, tag, comm, 1, NULL, message, status, "MPI_Mprobe");
}

int PMPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status) {
	return mprobe(source, tag, comm, 0, flag, message, status, "MPI_Improbe");
}

/* mrecv receives a matched message; with request it is Imrecv. */
static int mrecv(void *buf, MPI_Count count, MPI_Datatype t, MPI_Message *message, MPI_Status *status,
		 MPI_Request *request, const char *fn) {
	int rc = gompi_check_init(fn);
	if ((rc = check_buf(count, t))) return gompi_error(MPI_COMM_SELF, rc, fn);
	if (message == NULL || *message == MPI_MESSAGE_NULL) return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, fn);
	uintptr_t h;
	if (*message == MPI_MESSAGE_NO_PROC) {
		*message = MPI_MESSAGE_NULL;
		gompi_status_set(status, MPI_PROC_NULL, MPI_ANY_TAG, 0, 0);
		if (request == NULL) return MPI_SUCCESS;
		/* a request completing at once, as a receive from MPI_PROC_NULL */
		rc = gompi_go_irecv((uintptr_t)MPI_COMM_SELF, buf, 0, (uintptr_t)t, MPI_PROC_NULL, 0, &h);
		if (rc == MPI_SUCCESS) *request = (MPI_Request)h;
		return gompi_error(MPI_COMM_SELF, rc, fn);
	}
	rc = gompi_go_mrecv((uintptr_t)*message, buf, count, (uintptr_t)t, status, request ? &h : NULL);
	*message = MPI_MESSAGE_NULL;
	if (rc == MPI_SUCCESS && request) *request = (MPI_Request)h;
	if (rc != MPI_SUCCESS && status != MPI_STATUS_IGNORE && !request) status->MPI_ERROR = rc;
	return gompi_error(MPI_COMM_SELF, rc, fn);
}

int PMPI_Mrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status) {
	return mrecv(buf, count, datatype, message, status, NULL, "MPI_Mrecv");
}

int PMPI_Mrecv_c(void *buf, MPI_Count count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status) {
	return mrecv(buf, count, datatype, message, status, NULL, "MPI_Mrecv_c");
}

int PMPI_Imrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Request *request) {
	return mrecv(buf, count, datatype, message, MPI_STATUS_IGNORE, request, "MPI_Imrecv");
}

int PMPI_Imrecv_c(void *buf, MPI_Count count, MPI_Datatype datatype, MPI_Message *message, MPI_Request *request) {
	return mrecv(buf, count, datatype, message, MPI_STATUS_IGNORE, request, "MPI_Imrecv_c");
}

/* ---- Buffered sends' buffer -------------------------------------------------- */

/* The attached buffer's address, which detach returns: package mpi keeps
 * its own copies of buffered messages and only counts the room. */
static void *bsend_buffer;

static int buffer_attach(void *buffer, MPI_Count size, const char *fn) {
	gompi_check_init(fn);
	if (size < 0) return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, fn);
	int rc = gompi_go_buffer_attach(size);
	if (rc == MPI_SUCCESS) bsend_buffer = buffer;
	return gompi_error(MPI_COMM_SELF, rc, fn);
}

int PMPI_Buffer_attach(void *buffer, int size) { return buffer_attach(buffer, size, "MPI_Buffer_attach"); }

int PMPI_Buffer_attach_c(void *buffer, MPI_Count size) { return buffer_attach(buffer, size, "MPI_Buffer_attach_c"); }

static int buffer_detach(void *buffer_addr, MPI_Count *size, const char *fn) {
	gompi_check_init(fn);
	int64_t n;
	int rc = gompi_go_buffer_detach(&n);
	if (rc == MPI_SUCCESS) {
		*(void **)buffer_addr = bsend_buffer;
		*size = n;
		bsend_buffer = NULL;
	}
	return gompi_error(MPI_COMM_SELF, rc, fn);
}

int PMPI_Buffer_detach(void *buffer_addr, int *size) {
	MPI_Count n = 0;
	int rc = buffer_detach(buffer_addr, &n, "MPI_Buffer_detach");
	if (rc == MPI_SUCCESS) *size = (int)n;
	return rc;
}

int PMPI_Buffer_detach_c(void *buffer_addr, MPI_Count *size) {
	return buffer_detach(buffer_addr, size, "MPI_Buffer_detach_c");
}

/* ---- Sendrecv_replace ------------------------------------------------------ */

static int sendrecv_replace(void *buf, MPI_Count count, MPI_Datatype t, int dest, int sendtag, int source, int recvtag,
			    MPI_Comm comm, MPI_Status *status, const char *fn) {
	int rc = gompi_check_init(fn);
	if ((rc = check_buf(count, t)) || (rc = check_peer(comm, dest, 0)) || (rc = check_tag(sendtag, 0)) ||
	    (rc = check_peer(comm, source, 1)) || (rc = check_tag(recvtag, 1)))
		return gompi_error(comm, rc, fn);
	rc = gompi_go_sendrecv_replace((uintptr_t)comm, buf, count, (uintptr_t)t, dest, sendtag, source, recvtag, status);
	if (rc != MPI_SUCCESS && status != MPI_STATUS_IGNORE) status->MPI_ERROR = rc;
	return gompi_error(comm, rc, fn);
}

int PMPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source, int recvtag,
			  MPI_Comm comm, MPI_Status *status) {
	return sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, status,
				"MPI_Sendrecv_replace");
}

int PMPI_Sendrecv_replace_c(void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int sendtag, int source,
			    int recvtag, MPI_Comm comm, MPI_Status *status) {
	return sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, status,
				"MPI_Sendrecv_replace_c");
}

#define GOMPI_FILE_p2p
#include "aliases_gen.h"
