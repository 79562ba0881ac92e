/*
 * ctest.h: the output helpers of capi/ctest's differential programs.
 * After MPI_Init a program calls ct_begin(argc, argv): each rank then
 * writes its lines to ARGV[1]/rank.N (stdout when there is no argument).
 * ct_out prints one result line; ct_check prints "FAIL ..." when a known
 * result is wrong; ct_end prints "done", finalizes and returns the exit
 * status. Error classes, comparison results and other constants whose
 * values differ between MPIs are printed by name (ct_errname, ct_name).
 */
#ifndef CTEST_H
#define CTEST_H
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *ct_f;
static int ct_rank, ct_size, ct_fails;

static inline void ct_begin(int argc, char **argv)
{
	MPI_Comm_rank(MPI_COMM_WORLD, &ct_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &ct_size);
	ct_f = stdout;
	if (argc > 1) {
		char path[4096];
		snprintf(path, sizeof path, "%s/rank.%d", argv[1], ct_rank);
		ct_f = fopen(path, "w");
		if (!ct_f) {
			perror(path);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
}

static inline void ct_out(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(ct_f, fmt, ap);
	va_end(ap);
	fputc('\n', ct_f);
}

static inline void ct_check(int ok, const char *fmt, ...)
{
	va_list ap;
	if (ok)
		return;
	ct_fails++;
	fputs("FAIL ", ct_f);
	va_start(ap, fmt);
	vfprintf(ct_f, fmt, ap);
	va_end(ap);
	fputc('\n', ct_f);
}

static inline int ct_end(void)
{
	ct_out("done");
	fflush(ct_f);
	MPI_Finalize();
	return ct_fails ? 1 : 0;
}

#define CT_NAME(x) {x, #x}
struct ct_named { int v; const char *name; };

static inline const char *ct_lookup(const struct ct_named *t, int n, int v)
{
	static char buf[32];
	int i;
	for (i = 0; i < n; i++)
		if (t[i].v == v)
			return t[i].name;
	snprintf(buf, sizeof buf, "unknown(%d)", v);
	return buf;
}

static inline const char *ct_errname(int cls)
{
	static const struct ct_named t[] = {
		CT_NAME(MPI_SUCCESS), CT_NAME(MPI_ERR_BUFFER), CT_NAME(MPI_ERR_COUNT), CT_NAME(MPI_ERR_TYPE),
		CT_NAME(MPI_ERR_TAG), CT_NAME(MPI_ERR_COMM), CT_NAME(MPI_ERR_RANK), CT_NAME(MPI_ERR_REQUEST),
		CT_NAME(MPI_ERR_ROOT), CT_NAME(MPI_ERR_GROUP), CT_NAME(MPI_ERR_OP), CT_NAME(MPI_ERR_TOPOLOGY),
		CT_NAME(MPI_ERR_DIMS), CT_NAME(MPI_ERR_ARG), CT_NAME(MPI_ERR_UNKNOWN), CT_NAME(MPI_ERR_TRUNCATE),
		CT_NAME(MPI_ERR_OTHER), CT_NAME(MPI_ERR_INTERN), CT_NAME(MPI_ERR_IN_STATUS), CT_NAME(MPI_ERR_PENDING),
		CT_NAME(MPI_ERR_KEYVAL), CT_NAME(MPI_ERR_INFO_KEY), CT_NAME(MPI_ERR_INFO_VALUE),
		CT_NAME(MPI_ERR_INFO_NOKEY), CT_NAME(MPI_ERR_INFO),
	};
	return ct_lookup(t, sizeof t / sizeof t[0], cls);
}

static inline const char *ct_name(int v)
{
	static const struct ct_named t[] = {
		CT_NAME(MPI_IDENT), CT_NAME(MPI_CONGRUENT), CT_NAME(MPI_SIMILAR), CT_NAME(MPI_UNEQUAL),
	};
	return ct_lookup(t, sizeof t / sizeof t[0], v);
}
#endif
