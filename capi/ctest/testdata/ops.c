/* Reduction ops: every predefined op over signed, unsigned (values above
 * the signed range: compared as unsigned), floating-point and logical
 * data; MINLOC/MAXLOC over the pair types; user ops, commutative and not
 * (a 2x2 matrix product, which must be reduced in rank order). */
#include "ctest.h"
#include <stdint.h>

static int r, s;

static void ints(void)
{
	static const struct { MPI_Op op; const char *name; } ops[] = {
		{MPI_SUM, "sum"}, {MPI_PROD, "prod"}, {MPI_MAX, "max"}, {MPI_MIN, "min"}, {MPI_LAND, "land"},
		{MPI_LOR, "lor"}, {MPI_LXOR, "lxor"}, {MPI_BAND, "band"}, {MPI_BOR, "bor"}, {MPI_BXOR, "bxor"},
	};
	int i, v[3] = {r + 1, (r % 2) ? 0 : 3 + r, -r * 7}, out[3];
	unsigned u[2] = {r == 1 ? 0x80000005u : 7u, 0xF0u >> r % 4}, uo[2];
	uint64_t w[2] = {r == s - 1 ? UINT64_C(0x8000000000000005) : 7, (uint64_t)r << 40}, wo[2];
	int8_t b[2] = {(int8_t)(-r), (int8_t)(r * 3)}, bo[2];
	for (i = 0; i < (int)(sizeof ops / sizeof ops[0]); i++) {
		MPI_Allreduce(v, out, 3, MPI_INT, ops[i].op, MPI_COMM_WORLD);
		ct_out("int %s %d %d %d", ops[i].name, out[0], out[1], out[2]);
		MPI_Allreduce(u, uo, 2, MPI_UNSIGNED, ops[i].op, MPI_COMM_WORLD);
		ct_out("unsigned %s %u %u", ops[i].name, uo[0], uo[1]);
		MPI_Allreduce(w, wo, 2, MPI_UINT64_T, ops[i].op, MPI_COMM_WORLD);
		ct_out("uint64 %s %llu %llu", ops[i].name, (unsigned long long)wo[0], (unsigned long long)wo[1]);
		MPI_Allreduce(b, bo, 2, MPI_INT8_T, ops[i].op, MPI_COMM_WORLD);
		ct_out("int8 %s %d %d", ops[i].name, bo[0], bo[1]);
	}
	MPI_Allreduce(w, wo, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
	ct_check(s < 2 || wo[0] == UINT64_C(0x8000000000000005), "uint64 max compared as signed");
}

static void floats(void)
{
	double d[2] = {1.0 / (r + 1), r * 0.5 - 1}, dout[2];
	float f = (float)(r + 1) * 0.25f, fout;
	long double ld = r + 0.5L, ldout;
	MPI_Allreduce(d, dout, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	ct_out("double sum %.17g %.17g", dout[0], dout[1]);
	MPI_Allreduce(d, dout, 2, MPI_DOUBLE, MPI_PROD, MPI_COMM_WORLD);
	ct_out("double prod %.17g %.17g", dout[0], dout[1]);
	MPI_Allreduce(d, dout, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
	ct_out("double min %.17g %.17g", dout[0], dout[1]);
	MPI_Allreduce(&f, &fout, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
	ct_out("float max %.9g", fout);
	MPI_Allreduce(&ld, &ldout, 1, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	ct_out("long double sum %.17g", (double)ldout);
}

static void pairs(void)
{
	struct { double v; int i; } di = {(double)((r * 5) % 3), r}, dio;
	struct { int v, i; } ii = {(r * 7) % 4, r}, iio;
	struct { float v; int i; } fi = {(float)(r % 2), r}, fio;
	struct { long v; int i; } li = {-(long)(r % 3), r}, lio;
	struct { short v; int i; } si = {(short)(r / 2), r}, sio;
	MPI_Allreduce(&di, &dio, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD);
	ct_out("double_int minloc %.17g %d", dio.v, dio.i);
	MPI_Allreduce(&di, &dio, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
	ct_out("double_int maxloc %.17g %d", dio.v, dio.i);
	MPI_Allreduce(&ii, &iio, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
	ct_out("2int maxloc %d %d", iio.v, iio.i);
	MPI_Allreduce(&ii, &iio, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD);
	ct_out("2int minloc %d %d", iio.v, iio.i);
	MPI_Allreduce(&fi, &fio, 1, MPI_FLOAT_INT, MPI_MAXLOC, MPI_COMM_WORLD);
	ct_out("float_int maxloc %.9g %d", fio.v, fio.i);
	MPI_Allreduce(&li, &lio, 1, MPI_LONG_INT, MPI_MINLOC, MPI_COMM_WORLD);
	ct_out("long_int minloc %ld %d", lio.v, lio.i);
	MPI_Allreduce(&si, &sio, 1, MPI_SHORT_INT, MPI_MAXLOC, MPI_COMM_WORLD);
	ct_out("short_int maxloc %d %d", sio.v, sio.i);
}

/* matmul: inout = in x inout for 2x2 integer matrices (row-major). */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
	int k, *a = in, *b = inout, c[4];
	(void)dt;
	for (k = 0; k < *len; k++, a += 4, b += 4) {
		c[0] = a[0] * b[0] + a[1] * b[2], c[1] = a[0] * b[1] + a[1] * b[3];
		c[2] = a[2] * b[0] + a[3] * b[2], c[3] = a[2] * b[1] + a[3] * b[3];
		memcpy(b, c, sizeof c);
	}
}

static void absmax(void *in, void *inout, int *len, MPI_Datatype *dt)
{
	int k, *a = in, *b = inout;
	(void)dt;
	for (k = 0; k < *len; k++)
		if (abs(a[k]) > abs(b[k]))
			b[k] = a[k];
}

static void user(void)
{
	MPI_Op mm, am;
	MPI_Datatype mat;
	int m[4] = {1, r + 1, 0, 1}, out[4] = {0}, root, v = (r % 2 ? -1 : 1) * r, vo, comm;
	/* not commutative: [[1,a],[0,1]] x [[0,1],[1,0]] chains make the order visible */
	if (r % 2) {
		m[0] = 0, m[1] = 1, m[2] = 1, m[3] = r;
	}
	MPI_Type_contiguous(4, MPI_INT, &mat);
	MPI_Type_commit(&mat);
	MPI_Op_create(matmul, 0, &mm);
	MPI_Op_commutative(mm, &comm);
	ct_out("matmul commutative %d", comm);
	for (root = 0; root < s; root++) {
		MPI_Reduce(m, out, 1, mat, mm, root, MPI_COMM_WORLD);
		if (r == root)
			ct_out("matmul reduce root %d: %d %d %d %d", root, out[0], out[1], out[2], out[3]);
	}
	MPI_Allreduce(m, out, 1, mat, mm, MPI_COMM_WORLD);
	ct_out("matmul allreduce %d %d %d %d", out[0], out[1], out[2], out[3]);
	MPI_Scan(m, out, 1, mat, mm, MPI_COMM_WORLD);
	ct_out("matmul scan %d %d %d %d", out[0], out[1], out[2], out[3]);
	MPI_Op_create(absmax, 1, &am);
	MPI_Allreduce(&v, &vo, 1, MPI_INT, am, MPI_COMM_WORLD);
	ct_out("absmax %d", vo);
	MPI_Op_free(&mm);
	MPI_Op_free(&am);
	ct_out("op freed null %d", mm == MPI_OP_NULL);
	MPI_Type_free(&mat);
}

#if MPI_VERSION >= 4
/* bigmax: MPI_User_function_c, lengths as MPI_Count */
static void bigmax(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt)
{
	MPI_Count k;
	int *a = in, *b = inout;
	(void)dt;
	for (k = 0; k < *len; k++)
		if (a[k] > b[k])
			b[k] = a[k];
}
#endif

/* more: Reduce_local, the commutativity of predefined ops, long double's
 * other ops, a non-commutative op in the other reductions, and the
 * errors of an op a type does not take. */
static void more(void)
{
	int a[4] = {1, 2, 3, 4}, b[4] = {4, 3, 2, 1}, comm, m[4] = {1, r + 1, 0, 1}, out[8], *blk, rc, k;
	long double ld = r % 2 ? -r - 0.5L : r + 0.25L, ldo;
	struct { long double v; int i; } ldi = {(long double)(r % 3), r}, ldio;
	double d = 1, dout;
	MPI_Op mm;
	MPI_Datatype mat;
	MPI_Request rq;
	MPI_Reduce_local(a, b, 4, MPI_INT, MPI_MAX);
	ct_out("reduce_local max %d %d %d %d", b[0], b[1], b[2], b[3]);
	MPI_Reduce_local(a, b, 4, MPI_INT, MPI_BXOR);
	ct_out("reduce_local bxor %d %d %d %d", b[0], b[1], b[2], b[3]);
	MPI_Op_commutative(MPI_SUM, &comm);
	ct_out("sum commutative %d", comm);
	MPI_Allreduce(&ld, &ldo, 1, MPI_LONG_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
	ct_out("long double min %.17g", (double)ldo);
	MPI_Allreduce(&ld, &ldo, 1, MPI_LONG_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	ct_out("long double max %.17g", (double)ldo);
	MPI_Allreduce(&ldi, &ldio, 1, MPI_LONG_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
	ct_out("long_double_int maxloc %.17g %d", (double)ldio.v, ldio.i);
	MPI_Allreduce(&ldi, &ldio, 1, MPI_LONG_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD);
	ct_out("long_double_int minloc %.17g %d", (double)ldio.v, ldio.i);
	/* a non-commutative op in every other reduction, blocking or not */
	if (r % 2)
		m[0] = 0, m[1] = 1, m[2] = 1, m[3] = r;
	MPI_Type_contiguous(4, MPI_INT, &mat);
	MPI_Type_commit(&mat);
	MPI_Op_create(matmul, 0, &mm);
	MPI_Iallreduce(m, out, 1, mat, mm, MPI_COMM_WORLD, &rq);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	ct_out("matmul iallreduce %d %d %d %d", out[0], out[1], out[2], out[3]);
	MPI_Exscan(m, out, 1, mat, mm, MPI_COMM_WORLD);
	if (r > 0)
		ct_out("matmul exscan %d %d %d %d", out[0], out[1], out[2], out[3]);
	blk = malloc(4 * s * sizeof(int));
	for (k = 0; k < s; k++)
		memcpy(blk + 4 * k, m, sizeof m), blk[4 * k + 1] += k;
	MPI_Reduce_scatter_block(blk, out, 1, mat, mm, MPI_COMM_WORLD);
	ct_out("matmul reduce_scatter_block %d %d %d %d", out[0], out[1], out[2], out[3]);
	free(blk);
	MPI_Op_free(&mm);
	MPI_Type_free(&mat);
#if MPI_VERSION >= 4
	{
		int v = (r * 5) % 7, vo;
		MPI_Op_create_c(bigmax, 1, &mm);
		MPI_Allreduce(&v, &vo, 1, MPI_INT, mm, MPI_COMM_WORLD);
		ct_out("mpi4: op_create_c max %d", vo);
		MPI_Op_free(&mm);
	}
#endif
	/* an error of no communicator is raised on MPI_COMM_SELF since MPI-4,
	 * on MPI_COMM_WORLD before */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
	rc = MPI_Allreduce(&d, &dout, 1, MPI_DOUBLE, MPI_BXOR, MPI_COMM_WORLD);
	ct_out("double bxor: %s", ct_errname(rc));
	rc = MPI_Allreduce(a, out, 1, MPI_INT, MPI_MAXLOC, MPI_COMM_WORLD);
	ct_out("int maxloc: %s", ct_errname(rc));
	rc = MPI_Reduce_local(a, b, 1, MPI_FLOAT_INT, MPI_SUM);
	ct_out("float_int sum: %s", ct_errname(rc));
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	ct_begin(argc, argv);
	r = ct_rank, s = ct_size;
	ints();
	floats();
	pairs();
	user();
	more();
	return ct_end();
}
