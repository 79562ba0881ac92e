/*
 * op.c: reduction operations. User ops live in Go (op.go) as handles
 * GOMPI_HANDLE(GOMPI_KIND_OP, n); Go calls their C function back through
 * gompi_op_call. Reductions on C's long double, which Go has no type for,
 * run here (gompi_op_ldouble).
 */
#include <string.h>

#include "_cgo_export.h"
#include "gompi.h"

static int op_create(void *fn, int commute, int big, MPI_Op *op, const char *fn_name) {
	gompi_check_init(fn_name);
	if (fn == NULL || op == NULL) return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, fn_name);
	uintptr_t h;
	int rc = gompi_go_op_create((uintptr_t)fn, commute != 0, big, &h);
	if (rc == MPI_SUCCESS) *op = (MPI_Op)h;
	return gompi_error(MPI_COMM_SELF, rc, fn_name);
}

int PMPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op) {
	return op_create((void *)user_fn, commute, 0, op, "MPI_Op_create");
}

int PMPI_Op_create_c(MPI_User_function_c *user_fn, int commute, MPI_Op *op) {
	return op_create((void *)user_fn, commute, 1, op, "MPI_Op_create_c");
}

int PMPI_Op_free(MPI_Op *op) {
	gompi_check_init("MPI_Op_free");
	if (op == NULL) return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, "MPI_Op_free");
	/* predefined ops cannot be freed: the Go side knows only user ones */
	int rc = gompi_go_op_free((uintptr_t)*op);
	if (rc == MPI_SUCCESS) *op = MPI_OP_NULL;
	return gompi_error(MPI_COMM_SELF, rc, "MPI_Op_free");
}

int PMPI_Op_commutative(MPI_Op op, int *commute) {
	gompi_check_init("MPI_Op_commutative");
	int rc = gompi_go_op_commutative((uintptr_t)op, commute);
	return gompi_error(MPI_COMM_SELF, rc, "MPI_Op_commutative");
}

static int reduce_local(const void *inbuf, void *inoutbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
			const char *fn) {
	gompi_check_init(fn);
	int rc = count < 0 ? MPI_ERR_COUNT
			   : gompi_go_reduce_local((void *)inbuf, inoutbuf, count, (uintptr_t)datatype, (uintptr_t)op);
	return gompi_error(MPI_COMM_SELF, rc, fn);
}

int PMPI_Reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype datatype, MPI_Op op) {
	return reduce_local(inbuf, inoutbuf, count, datatype, op, "MPI_Reduce_local");
}

int PMPI_Reduce_local_c(const void *inbuf, void *inoutbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op) {
	return reduce_local(inbuf, inoutbuf, count, datatype, op, "MPI_Reduce_local_c");
}

/* gompi_op_call calls a user op's function on len elements of datatype dt
 * (MPI_User_function, or MPI_User_function_c when big). */
void gompi_op_call(uintptr_t fn, int big, void *in, void *inout, int64_t len, uintptr_t dt) {
	MPI_Datatype t = (MPI_Datatype)dt;
	if (big) {
		MPI_Count n = len;
		((MPI_User_function_c *)fn)(in, inout, &n, &t);
	} else {
		int n = (int)len;
		((MPI_User_function *)fn)(in, inout, &n, &t);
	}
}

/* gompi_op_ldouble combines n elements of in into inout (inout = inout op
 * in) for long double (pair == 0) or MPI_LONG_DOUBLE_INT (pair == 1), op
 * being the predefined handle; it returns 0, or -1 for an op the type does
 * not take. Elements may be unaligned: they are copied out and back. */
int gompi_op_ldouble(uintptr_t op, int pair, void *inout, const void *in, int64_t n) {
	typedef struct {
		long double v;
		int i;
	} ldi;
	size_t sz = pair ? sizeof(ldi) : sizeof(long double);
	int loc = op == (uintptr_t)MPI_MINLOC || op == (uintptr_t)MPI_MAXLOC;
	if (loc != pair ||
	    (!loc && op != (uintptr_t)MPI_SUM && op != (uintptr_t)MPI_PROD && op != (uintptr_t)MPI_MIN &&
	     op != (uintptr_t)MPI_MAX))
		return -1;
	for (int64_t k = 0; k < n; k++) {
		ldi a = {0, 0}, b = {0, 0};
		memcpy(&a, (char *)inout + k * sz, sz);
		memcpy(&b, (const char *)in + k * sz, sz);
		if (op == (uintptr_t)MPI_SUM) a.v += b.v;
		else if (op == (uintptr_t)MPI_PROD) a.v *= b.v;
		else if (op == (uintptr_t)MPI_MIN) a.v = b.v < a.v ? b.v : a.v;
		else if (op == (uintptr_t)MPI_MAX) a.v = b.v > a.v ? b.v : a.v;
		else if ((op == (uintptr_t)MPI_MINLOC ? b.v < a.v : b.v > a.v) || (b.v == a.v && b.i < a.i)) a = b;
		memcpy((char *)inout + k * sz, &a, sz);
	}
	return 0;
}

#define GOMPI_FILE_op
#include "aliases_gen.h"
