/* Error handling: ERRORS_RETURN and the classes of wrong calls, a user
 * error handler called by Comm_call_errhandler, Get_errhandler,
 * Error_class/Error_string, Add_error_class/code/string; ERRORS_ABORT
 * (MPI-4) exists. */
#include "ctest.h"

static int handled_code = -1, handled_calls;

static void handler(MPI_Comm *comm, int *code, ...)
{
	(void)comm;
	handled_code = *code;
	handled_calls++;
}

static void classes(void)
{
	int v = 0, rc, cls, big[4];
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	rc = MPI_Send(&v, 1, MPI_INT, ct_size, 0, MPI_COMM_WORLD);
	MPI_Error_class(rc, &cls);
	ct_out("send to rank size: %s", ct_errname(cls));
	rc = MPI_Send(&v, -1, MPI_INT, 0, 0, MPI_COMM_WORLD);
	MPI_Error_class(rc, &cls);
	ct_out("negative count: %s", ct_errname(cls));
	rc = MPI_Send(&v, 1, MPI_INT, 0, -5, MPI_COMM_WORLD);
	MPI_Error_class(rc, &cls);
	ct_out("negative tag: %s", ct_errname(cls));
	rc = MPI_Send(&v, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD);
	MPI_Error_class(rc, &cls);
	ct_out("null type: %s", ct_errname(cls));
	rc = MPI_Bcast(&v, 1, MPI_INT, ct_size + 1, MPI_COMM_WORLD);
	MPI_Error_class(rc, &cls);
	ct_out("bad root: %s", ct_errname(cls));
	rc = MPI_Allreduce(&v, big, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD);
	MPI_Error_class(rc, &cls);
	ct_out("null op: %s", ct_errname(cls));
	{
		int in[4] = {1, 2, 3, 4};
		MPI_Status st;
		MPI_Request rq;
		MPI_Isend(in, 4, MPI_INT, ct_rank, 7, MPI_COMM_WORLD, &rq);
		rc = MPI_Recv(big, 2, MPI_INT, ct_rank, 7, MPI_COMM_WORLD, &st);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
		MPI_Error_class(rc, &cls);
		ct_out("truncated recv: %s", ct_errname(cls));
	}
}

static void user_handlers(void)
{
	MPI_Errhandler eh, got;
	MPI_Comm dup;
	int rc, cls, code, code2, len, v = 0;
	char msg[MPI_MAX_ERROR_STRING];
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Comm_create_errhandler(handler, &eh);
	MPI_Comm_set_errhandler(dup, eh);
	MPI_Comm_get_errhandler(dup, &got);
	ct_out("get_errhandler same %d", got == eh);
	MPI_Errhandler_free(&got);
	MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER);
	MPI_Error_class(handled_code, &cls);
	ct_out("call_errhandler calls %d class %s", handled_calls, ct_errname(cls));
	rc = MPI_Send(&v, 1, MPI_INT, ct_size, 0, dup);
	MPI_Error_class(handled_code, &cls);
	ct_out("handler on a wrong send calls %d class %s rc-is-code %d", handled_calls, ct_errname(cls), rc == handled_code);
	MPI_Errhandler_free(&eh);
	ct_out("errhandler freed null %d", eh == MPI_ERRHANDLER_NULL);
	MPI_Comm_free(&dup);

	MPI_Add_error_class(&cls);
	MPI_Add_error_code(cls, &code);
	MPI_Add_error_code(cls, &code2);
	MPI_Add_error_string(code, "ctest: a code of our own");
	MPI_Error_string(code, msg, &len);
	ct_out("added string %s len %d", msg, len);
	MPI_Error_class(code2, &rc);
	ct_out("added codes differ %d class of code2 is the class %d class>MPI_ERR_LASTCODE %d", code != code2,
	       rc == cls, cls > MPI_ERR_LASTCODE);
	{
		int *lastused, flag;
		MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &lastused, &flag);
		ct_out("lastusedcode covers them %d", flag && *lastused >= code2);
	}
	MPI_Error_string(MPI_ERR_TRUNCATE, msg, &len);
	ct_check(len > 0 && (int)strlen(msg) == len, "Error_string of MPI_ERR_TRUNCATE has length %d", len);
	MPI_Error_class(MPI_SUCCESS, &cls);
	ct_out("class of success %s", ct_errname(cls));
#if MPI_VERSION >= 4
	ct_out("mpi4: errors_abort not null %d", MPI_ERRORS_ABORT != MPI_ERRHANDLER_NULL);
	ct_check(MPI_ERRORS_ABORT != MPI_ERRHANDLER_NULL, "MPI_ERRORS_ABORT is null");
#endif
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	ct_begin(argc, argv);
	classes();
	user_handlers();
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	return ct_end();
}
