/*
 * datatype.c: datatypes. Constructors pass their arguments to Go laid out
 * as MPI_Type_get_contents returns them (datatype.go builds the type map
 * from that record and keeps it); sizes and counts of predefined types
 * stay in C (gompi_type_size).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "_cgo_export.h"
#include "gompi.h"

int64_t gompi_type_size_all(MPI_Datatype t) {
	int64_t n = gompi_type_size(t), lb, ext, tlb, text;
	if (n >= 0 || t == MPI_DATATYPE_NULL) return n;
	if (gompi_go_type_info((uintptr_t)t, &n, &lb, &ext, &tlb, &text) != MPI_SUCCESS) return -1;
	return n;
}

int64_t gompi_type_size_of(uintptr_t h) { return gompi_type_size((MPI_Datatype)h); }

/* make files a derived datatype from its get_contents record. */
static int make(int comb, int ni, const int64_t *ints, int na, const int64_t *addrs, int nt, const MPI_Datatype *olds,
		MPI_Datatype *newtype, const char *fn) {
	gompi_check_init(fn);
	if (newtype == NULL) return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, fn);
	uintptr_t h;
	int rc = gompi_go_type_new(comb, ni, (int64_t *)ints, na, (int64_t *)addrs, nt, (uintptr_t *)olds, &h);
	if (rc == MPI_SUCCESS) *newtype = (MPI_Datatype)h;
	return gompi_error(MPI_COMM_SELF, rc, fn);
}

/* A record's arrays: ints and addrs, each of a length the constructor
 * knows; counts come in as int, MPI_Aint or MPI_Count. */
struct rec {
	int64_t *i, *a;
	int ni, na;
};

static int rec_alloc(struct rec *r, int64_t ni, int64_t na) {
	r->ni = (int)ni, r->na = (int)na;
	r->i = calloc(ni + 1, sizeof(int64_t));
	r->a = calloc(na + 1, sizeof(int64_t));
	return r->i && r->a ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

static int rec_make(struct rec *r, int comb, int nt, const MPI_Datatype *olds, MPI_Datatype *newtype, const char *fn) {
	int rc = make(comb, r->ni, r->i, r->na, r->a, nt, olds, newtype, fn);
	free(r->i), free(r->a);
	return rc;
}

#define PUT(dst, src, n)                                                                     \
	do {                                                                                 \
		for (int64_t k_ = 0; k_ < (int64_t)(n); k_++) (dst)[k_] = (int64_t)(src)[k_]; \
	} while (0)

#define BAD_COUNT(n, fn) \
	if ((n) < 0) return gompi_error(MPI_COMM_SELF, MPI_ERR_COUNT, fn)

/* ---- Constructors: one body per combiner, in int and large-count forms ---- */

static int contiguous(int64_t count, MPI_Datatype old, MPI_Datatype *newtype, const char *fn) {
	BAD_COUNT(count, fn);
	int64_t in[1] = {count};
	return make(MPI_COMBINER_CONTIGUOUS, 1, in, 0, NULL, 1, &old, newtype, fn);
}

int PMPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype *newtype) {
	return contiguous(count, oldtype, newtype, "MPI_Type_contiguous");
}

int PMPI_Type_contiguous_c(MPI_Count count, MPI_Datatype oldtype, MPI_Datatype *newtype) {
	return contiguous(count, oldtype, newtype, "MPI_Type_contiguous_c");
}

static int vector(int comb, int64_t count, int64_t bl, int64_t stride, MPI_Datatype old, MPI_Datatype *newtype,
		  const char *fn) {
	BAD_COUNT(count, fn);
	BAD_COUNT(bl, fn);
	int64_t in[3] = {count, bl, stride}, ad[1] = {stride};
	if (comb == MPI_COMBINER_HVECTOR) return make(comb, 2, in, 1, ad, 1, &old, newtype, fn);
	return make(comb, 3, in, 0, NULL, 1, &old, newtype, fn);
}

int PMPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype *newtype) {
	return vector(MPI_COMBINER_VECTOR, count, blocklength, stride, oldtype, newtype, "MPI_Type_vector");
}

int PMPI_Type_vector_c(MPI_Count count, MPI_Count blocklength, MPI_Count stride, MPI_Datatype oldtype,
		       MPI_Datatype *newtype) {
	return vector(MPI_COMBINER_VECTOR, count, blocklength, stride, oldtype, newtype, "MPI_Type_vector_c");
}

int PMPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype *newtype) {
	return vector(MPI_COMBINER_HVECTOR, count, blocklength, stride, oldtype, newtype, "MPI_Type_create_hvector");
}

int PMPI_Type_create_hvector_c(MPI_Count count, MPI_Count blocklength, MPI_Count stride, MPI_Datatype oldtype,
			       MPI_Datatype *newtype) {
	return vector(MPI_COMBINER_HVECTOR, count, blocklength, stride, oldtype, newtype, "MPI_Type_create_hvector_c");
}

/* INDEXED: ints = count, blocklengths, displacements.
 * HINDEXED: ints = count, blocklengths; addrs = displacements. */
#define INDEXED(COMB, HADDR, FN)                                                   \
	{                                                                          \
		BAD_COUNT(count, FN);                                              \
		struct rec r;                                                      \
		if (rec_alloc(&r, HADDR ? 1 + count : 1 + 2 * count, HADDR ? count : 0)) \
			return gompi_error(MPI_COMM_SELF, MPI_ERR_NO_MEM, FN);     \
		r.i[0] = count;                                                    \
		PUT(r.i + 1, bl, count);                                           \
		if (HADDR)                                                         \
			PUT(r.a, displs, count);                                   \
		else                                                               \
			PUT(r.i + 1 + count, displs, count);                       \
		return rec_make(&r, COMB, 1, &oldtype, newtype, FN);               \
	}

int PMPI_Type_indexed(int count, const int bl[], const int displs[], MPI_Datatype oldtype, MPI_Datatype *newtype)
	INDEXED(MPI_COMBINER_INDEXED, 0, "MPI_Type_indexed")

int PMPI_Type_indexed_c(MPI_Count count, const MPI_Count bl[], const MPI_Count displs[], MPI_Datatype oldtype,
			MPI_Datatype *newtype) INDEXED(MPI_COMBINER_INDEXED, 0, "MPI_Type_indexed_c")

int PMPI_Type_create_hindexed(int count, const int bl[], const MPI_Aint displs[], MPI_Datatype oldtype,
			      MPI_Datatype *newtype) INDEXED(MPI_COMBINER_HINDEXED, 1, "MPI_Type_create_hindexed")

int PMPI_Type_create_hindexed_c(MPI_Count count, const MPI_Count bl[], const MPI_Count displs[], MPI_Datatype oldtype,
				MPI_Datatype *newtype) INDEXED(MPI_COMBINER_HINDEXED, 1, "MPI_Type_create_hindexed_c")

/* INDEXED_BLOCK: ints = count, blocklength, displacements.
 * HINDEXED_BLOCK: ints = count, blocklength; addrs = displacements. */
#define INDEXED_BLOCK(COMB, HADDR, FN)                                                  \
	{                                                                               \
		BAD_COUNT(count, FN);                                                   \
		BAD_COUNT(blocklength, FN);                                             \
		struct rec r;                                                           \
		if (rec_alloc(&r, HADDR ? 2 : 2 + count, HADDR ? count : 0))            \
			return gompi_error(MPI_COMM_SELF, MPI_ERR_NO_MEM, FN);          \
		r.i[0] = count, r.i[1] = blocklength;                                   \
		if (HADDR)                                                              \
			PUT(r.a, displs, count);                                        \
		else                                                                    \
			PUT(r.i + 2, displs, count);                                    \
		return rec_make(&r, COMB, 1, &oldtype, newtype, FN);                    \
	}

int PMPI_Type_create_indexed_block(int count, int blocklength, const int displs[], MPI_Datatype oldtype,
				   MPI_Datatype *newtype)
	INDEXED_BLOCK(MPI_COMBINER_INDEXED_BLOCK, 0, "MPI_Type_create_indexed_block")

int PMPI_Type_create_indexed_block_c(MPI_Count count, MPI_Count blocklength, const MPI_Count displs[],
				     MPI_Datatype oldtype, MPI_Datatype *newtype)
	INDEXED_BLOCK(MPI_COMBINER_INDEXED_BLOCK, 0, "MPI_Type_create_indexed_block_c")

int PMPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint displs[], MPI_Datatype oldtype,
				    MPI_Datatype *newtype)
	INDEXED_BLOCK(MPI_COMBINER_HINDEXED_BLOCK, 1, "MPI_Type_create_hindexed_block")

int PMPI_Type_create_hindexed_block_c(MPI_Count count, MPI_Count blocklength, const MPI_Count displs[],
				      MPI_Datatype oldtype, MPI_Datatype *newtype)
	INDEXED_BLOCK(MPI_COMBINER_HINDEXED_BLOCK, 1, "MPI_Type_create_hindexed_block_c")

/* STRUCT: ints = count, blocklengths; addrs = displacements; the types. */
#define STRUCT(FN)                                                              \
	{                                                                       \
		BAD_COUNT(count, FN);                                           \
		struct rec r;                                                   \
		if (rec_alloc(&r, 1 + count, count))                            \
			return gompi_error(MPI_COMM_SELF, MPI_ERR_NO_MEM, FN);  \
		r.i[0] = count;                                                 \
		PUT(r.i + 1, bl, count);                                        \
		PUT(r.a, displs, count);                                        \
		return rec_make(&r, MPI_COMBINER_STRUCT, (int)count, types, newtype, FN); \
	}

int PMPI_Type_create_struct(int count, const int bl[], const MPI_Aint displs[], const MPI_Datatype types[],
			    MPI_Datatype *newtype) STRUCT("MPI_Type_create_struct")

int PMPI_Type_create_struct_c(MPI_Count count, const MPI_Count bl[], const MPI_Count displs[],
			      const MPI_Datatype types[], MPI_Datatype *newtype) STRUCT("MPI_Type_create_struct_c")

/* SUBARRAY: ints = ndims, sizes, subsizes, starts, order. */
#define SUBARRAY(FN)                                                            \
	{                                                                       \
		if (ndims <= 0) return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, FN); \
		if (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)         \
			return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, FN);     \
		struct rec r;                                                   \
		if (rec_alloc(&r, 2 + 3 * ndims, 0))                            \
			return gompi_error(MPI_COMM_SELF, MPI_ERR_NO_MEM, FN);  \
		r.i[0] = ndims;                                                 \
		PUT(r.i + 1, sizes, ndims);                                     \
		PUT(r.i + 1 + ndims, subsizes, ndims);                          \
		PUT(r.i + 1 + 2 * ndims, starts, ndims);                        \
		r.i[1 + 3 * ndims] = order;                                     \
		return rec_make(&r, MPI_COMBINER_SUBARRAY, 1, &oldtype, newtype, FN); \
	}

int PMPI_Type_create_subarray(int ndims, const int sizes[], const int subsizes[], const int starts[], int order,
			      MPI_Datatype oldtype, MPI_Datatype *newtype) SUBARRAY("MPI_Type_create_subarray")

int PMPI_Type_create_subarray_c(int ndims, const MPI_Count sizes[], const MPI_Count subsizes[],
				const MPI_Count starts[], int order, MPI_Datatype oldtype, MPI_Datatype *newtype)
	SUBARRAY("MPI_Type_create_subarray_c")

int PMPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype *newtype) {
	int64_t ad[2] = {lb, extent};
	return make(MPI_COMBINER_RESIZED, 0, NULL, 2, ad, 1, &oldtype, newtype, "MPI_Type_create_resized");
}

int PMPI_Type_create_resized_c(MPI_Datatype oldtype, MPI_Count lb, MPI_Count extent, MPI_Datatype *newtype) {
	int64_t ad[2] = {lb, extent};
	return make(MPI_COMBINER_RESIZED, 0, NULL, 2, ad, 1, &oldtype, newtype, "MPI_Type_create_resized_c");
}

/* MPI_Type_dup also copies oldtype's attributes (attr.c runs their copy
 * callbacks); when one fails, the new type is freed again. */
int PMPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype *newtype) {
	MPI_Datatype t = MPI_DATATYPE_NULL;
	int rc = make(MPI_COMBINER_DUP, 0, NULL, 0, NULL, 1, &oldtype, &t, "MPI_Type_dup");
	if (rc != MPI_SUCCESS) return rc;
	rc = gompi_attr_copy(GOMPI_ATTR_TYPE, (uintptr_t)oldtype, (uintptr_t)t);
	if (rc != MPI_SUCCESS) {
		/* raised on MPI_COMM_WORLD, as the type attribute calls do
		 * (MPICH's attrerrtype sets ERRORS_RETURN there) */
		uintptr_t h = (uintptr_t)t;
		gompi_attr_free(GOMPI_ATTR_TYPE, h);
		gompi_go_type_free(&h);
		*newtype = MPI_DATATYPE_NULL;
		return gompi_error(MPI_COMM_WORLD, rc, "MPI_Type_dup");
	}
	*newtype = t;
	return MPI_SUCCESS;
}

/* ---- Life and queries ---------------------------------------------------- */

int PMPI_Type_commit(MPI_Datatype *datatype) {
	gompi_check_init("MPI_Type_commit");
	if (datatype == NULL) return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, "MPI_Type_commit");
	return gompi_error(MPI_COMM_SELF, gompi_go_type_commit((uintptr_t)*datatype), "MPI_Type_commit");
}

int PMPI_Type_free(MPI_Datatype *datatype) {
	gompi_check_init("MPI_Type_free");
	if (datatype == NULL) return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, "MPI_Type_free");
	uintptr_t h = (uintptr_t)*datatype;
	/* a derived type's attributes go first (attr.c); a delete callback
	 * that fails keeps the type */
	int rc = MPI_SUCCESS;
	if (h >= GOMPI_HANDLE_BASE && GOMPI_HANDLE_KIND(h) == GOMPI_KIND_TYPE && gompi_type_size_all(*datatype) >= 0)
		rc = gompi_attr_free(GOMPI_ATTR_TYPE, h);
	if (rc == MPI_SUCCESS) rc = gompi_go_type_free(&h);
	*datatype = (MPI_Datatype)h;
	return gompi_error(MPI_COMM_SELF, rc, "MPI_Type_free");
}

/* info reports a datatype's size and bounds: C's for a predefined one
 * whose size C knows (its bounds are 0 and its size), else Go's. */
static int info(MPI_Datatype t, int64_t v[5]) {
	int64_t n = gompi_type_size(t);
	if (n >= 0) {
		v[0] = n, v[1] = 0, v[2] = n, v[3] = 0, v[4] = n;
		return MPI_SUCCESS;
	}
	return gompi_go_type_info((uintptr_t)t, &v[0], &v[1], &v[2], &v[3], &v[4]);
}

static int to_int(int64_t v) { return v > INT_MAX ? MPI_UNDEFINED : (int)v; }

int PMPI_Type_size(MPI_Datatype datatype, int *size) {
	int64_t v[5];
	if (info(datatype, v)) return gompi_error(MPI_COMM_SELF, MPI_ERR_TYPE, "MPI_Type_size");
	*size = to_int(v[0]);
	return MPI_SUCCESS;
}

int PMPI_Type_size_c(MPI_Datatype datatype, MPI_Count *size) {
	int64_t v[5];
	if (info(datatype, v)) return gompi_error(MPI_COMM_SELF, MPI_ERR_TYPE, "MPI_Type_size_c");
	*size = v[0];
	return MPI_SUCCESS;
}

int PMPI_Type_size_x(MPI_Datatype datatype, MPI_Count *size) {
	int64_t v[5];
	if (info(datatype, v)) return gompi_error(MPI_COMM_SELF, MPI_ERR_TYPE, "MPI_Type_size_x");
	*size = v[0];
	return MPI_SUCCESS;
}

#define EXTENT(T, I, FN)                                                                         \
	{                                                                                        \
		int64_t v[5];                                                                    \
		if (info(datatype, v)) return gompi_error(MPI_COMM_SELF, MPI_ERR_TYPE, FN);      \
		*lb = (T)v[I], *extent = (T)v[I + 1];                                            \
		return MPI_SUCCESS;                                                              \
	}

int PMPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent) EXTENT(MPI_Aint, 1, "MPI_Type_get_extent")
int PMPI_Type_get_extent_c(MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent)
	EXTENT(MPI_Count, 1, "MPI_Type_get_extent_c")
int PMPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent)
	EXTENT(MPI_Count, 1, "MPI_Type_get_extent_x")
int PMPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent)
	EXTENT(MPI_Aint, 3, "MPI_Type_get_true_extent")
int PMPI_Type_get_true_extent_c(MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent)
	EXTENT(MPI_Count, 3, "MPI_Type_get_true_extent_c")
int PMPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent)
	EXTENT(MPI_Count, 3, "MPI_Type_get_true_extent_x")

int PMPI_Type_get_name(MPI_Datatype datatype, char *type_name, int *resultlen) {
	if (type_name == NULL || resultlen == NULL) return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, "MPI_Type_get_name");
	int rc = gompi_go_type_name((uintptr_t)datatype, type_name, MPI_MAX_OBJECT_NAME, resultlen);
	return gompi_error(MPI_COMM_SELF, rc, "MPI_Type_get_name");
}

int PMPI_Type_set_name(MPI_Datatype datatype, const char *type_name) {
	if (type_name == NULL) return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, "MPI_Type_set_name");
	return gompi_error(MPI_COMM_SELF, gompi_go_type_set_name((uintptr_t)datatype, (char *)type_name),
			   "MPI_Type_set_name");
}

int PMPI_Type_get_envelope(MPI_Datatype datatype, int *num_integers, int *num_addresses, int *num_datatypes,
			   int *combiner) {
	int64_t ni, na, nt, comb;
	int rc = gompi_go_type_envelope((uintptr_t)datatype, &ni, &na, &nt, &comb);
	if (rc) return gompi_error(MPI_COMM_SELF, rc, "MPI_Type_get_envelope");
	*num_integers = (int)ni, *num_addresses = (int)na, *num_datatypes = (int)nt, *combiner = (int)comb;
	return MPI_SUCCESS;
}

int PMPI_Type_get_envelope_c(MPI_Datatype datatype, MPI_Count *num_integers, MPI_Count *num_addresses,
			     MPI_Count *num_large_counts, MPI_Count *num_datatypes, int *combiner) {
	int64_t comb;
	int rc = gompi_go_type_envelope((uintptr_t)datatype, num_integers, num_addresses, num_datatypes, &comb);
	if (rc) return gompi_error(MPI_COMM_SELF, rc, "MPI_Type_get_envelope_c");
	*num_large_counts = 0, *combiner = (int)comb;
	return MPI_SUCCESS;
}

static int contents(MPI_Datatype t, int64_t maxi, int64_t maxa, int64_t maxt, int ints[], MPI_Aint addrs[],
		    MPI_Datatype types[], const char *fn) {
	int64_t *i = malloc((maxi + 1) * sizeof(int64_t)), *a = malloc((maxa + 1) * sizeof(int64_t));
	int64_t ni, na, nt, comb;
	int rc = i && a ? gompi_go_type_envelope((uintptr_t)t, &ni, &na, &nt, &comb) : MPI_ERR_NO_MEM;
	if (rc == MPI_SUCCESS)
		rc = gompi_go_type_contents((uintptr_t)t, maxi, maxa, maxt, i, a, (uintptr_t *)types);
	if (rc == MPI_SUCCESS) {
		for (int64_t k = 0; k < ni; k++) ints[k] = (int)i[k];
		for (int64_t k = 0; k < na; k++) addrs[k] = (MPI_Aint)a[k];
	}
	free(i), free(a);
	return gompi_error(MPI_COMM_SELF, rc, fn);
}

int PMPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses, int max_datatypes,
			   int array_of_integers[], MPI_Aint array_of_addresses[], MPI_Datatype array_of_datatypes[]) {
	return contents(datatype, max_integers, max_addresses, max_datatypes, array_of_integers, array_of_addresses,
			array_of_datatypes, "MPI_Type_get_contents");
}

int PMPI_Type_get_contents_c(MPI_Datatype datatype, MPI_Count max_integers, MPI_Count max_addresses,
			     MPI_Count max_large_counts, MPI_Count max_datatypes, int array_of_integers[],
			     MPI_Aint array_of_addresses[], MPI_Count array_of_large_counts[],
			     MPI_Datatype array_of_datatypes[]) {
	(void)max_large_counts, (void)array_of_large_counts;
	return contents(datatype, max_integers, max_addresses, max_datatypes, array_of_integers, array_of_addresses,
			array_of_datatypes, "MPI_Type_get_contents_c");
}

/* Type_match_size answers with the Fortran-named types of a size, as MPI
 * says it does. */
int PMPI_Type_match_size(int typeclass, int size, MPI_Datatype *datatype) {
	MPI_Datatype t = MPI_DATATYPE_NULL;
	switch (typeclass) {
	case MPI_TYPECLASS_INTEGER:
		t = size == 1 ? MPI_INTEGER1 : size == 2 ? MPI_INTEGER2 : size == 4 ? MPI_INTEGER4
		    : size == 8 ? MPI_INTEGER8 : t;
		break;
	case MPI_TYPECLASS_REAL:
		t = size == 4 ? MPI_REAL4 : size == 8 ? MPI_REAL8 : size == 16 ? MPI_REAL16 : t;
		break;
	case MPI_TYPECLASS_COMPLEX:
		t = size == 8 ? MPI_COMPLEX8 : size == 16 ? MPI_COMPLEX16 : size == 32 ? MPI_COMPLEX32 : t;
		break;
	}
	if (t == MPI_DATATYPE_NULL) return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, "MPI_Type_match_size");
	*datatype = t;
	return MPI_SUCCESS;
}

/* ---- Pack and Unpack --------------------------------------------------------- */

static int pack(const void *in, MPI_Count count, MPI_Datatype t, void *out, MPI_Count size, MPI_Count *pos,
		MPI_Comm comm, const char *fn) {
	gompi_check_init(fn);
	if (!gompi_comm_known(comm) || comm == MPI_COMM_NULL) return gompi_error(MPI_COMM_SELF, MPI_ERR_COMM, fn);
	if (count < 0 || size < 0) return gompi_error(comm, MPI_ERR_COUNT, fn);
	return gompi_error(comm, gompi_go_pack((void *)in, count, (uintptr_t)t, out, size, pos), fn);
}

int PMPI_Pack(const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize, int *position,
	      MPI_Comm comm) {
	MPI_Count pos = *position;
	int rc = pack(inbuf, incount, datatype, outbuf, outsize, &pos, comm, "MPI_Pack");
	*position = (int)pos;
	return rc;
}

int PMPI_Pack_c(const void *inbuf, MPI_Count incount, MPI_Datatype datatype, void *outbuf, MPI_Count outsize,
		MPI_Count *position, MPI_Comm comm) {
	return pack(inbuf, incount, datatype, outbuf, outsize, position, comm, "MPI_Pack_c");
}

static int unpack(const void *in, MPI_Count size, MPI_Count *pos, void *out, MPI_Count count, MPI_Datatype t,
		  MPI_Comm comm, const char *fn) {
	gompi_check_init(fn);
	if (!gompi_comm_known(comm) || comm == MPI_COMM_NULL) return gompi_error(MPI_COMM_SELF, MPI_ERR_COMM, fn);
	if (count < 0 || size < 0) return gompi_error(comm, MPI_ERR_COUNT, fn);
	return gompi_error(comm, gompi_go_unpack((void *)in, size, pos, out, count, (uintptr_t)t), fn);
}

int PMPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount, MPI_Datatype datatype,
		MPI_Comm comm) {
	MPI_Count pos = *position;
	int rc = unpack(inbuf, insize, &pos, outbuf, outcount, datatype, comm, "MPI_Unpack");
	*position = (int)pos;
	return rc;
}

int PMPI_Unpack_c(const void *inbuf, MPI_Count insize, MPI_Count *position, void *outbuf, MPI_Count outcount,
		  MPI_Datatype datatype, MPI_Comm comm) {
	return unpack(inbuf, insize, position, outbuf, outcount, datatype, comm, "MPI_Unpack_c");
}

static int pack_size(MPI_Count count, MPI_Datatype t, MPI_Comm comm, MPI_Count *size, const char *fn) {
	gompi_check_init(fn);
	if (!gompi_comm_known(comm) || comm == MPI_COMM_NULL) return gompi_error(MPI_COMM_SELF, MPI_ERR_COMM, fn);
	if (count < 0) return gompi_error(comm, MPI_ERR_COUNT, fn);
	int64_t n = gompi_type_size_all(t);
	if (n < 0) return gompi_error(comm, MPI_ERR_TYPE, fn);
	*size = n * count;
	return MPI_SUCCESS;
}

int PMPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int *size) {
	MPI_Count n;
	int rc = pack_size(incount, datatype, comm, &n, "MPI_Pack_size");
	if (rc == MPI_SUCCESS) *size = to_int(n);
	return rc;
}

int PMPI_Pack_size_c(MPI_Count incount, MPI_Datatype datatype, MPI_Comm comm, MPI_Count *size) {
	return pack_size(incount, datatype, comm, size, "MPI_Pack_size_c");
}

/* ---- Counts in a status ------------------------------------------------------- */

static int64_t status_bytes(const MPI_Status *st) {
	return (int64_t)((uint64_t)(uint32_t)st->MPI_internal[0] | ((uint64_t)(uint32_t)st->MPI_internal[1] << 32));
}

int PMPI_Get_count_c(const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count) {
	int64_t n = gompi_type_size_all(datatype);
	if (n < 0) return gompi_error(MPI_COMM_SELF, MPI_ERR_TYPE, "MPI_Get_count");
	int64_t b = status_bytes(status);
	if (n == 0) *count = b == 0 ? 0 : MPI_UNDEFINED;
	else *count = b % n ? MPI_UNDEFINED : b / n;
	return MPI_SUCCESS;
}

int PMPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count) {
	MPI_Count c;
	int rc = PMPI_Get_count_c(status, datatype, &c);
	if (rc == MPI_SUCCESS) *count = c > INT_MAX ? MPI_UNDEFINED : (int)c;
	return rc;
}

/* An element is a basic one: a predefined dense type's own, counted in C;
 * the others' in Go (datatype.go: partial elements of a derived type, the
 * pair types' two). */
int PMPI_Get_elements_c(const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count) {
	int64_t n = gompi_type_size(datatype), b = status_bytes(status);
	int pair = (uintptr_t)datatype >= (uintptr_t)MPI_FLOAT_INT && (uintptr_t)datatype <= (uintptr_t)MPI_2INTEGER;
	if (n > 0 && !pair) {
		*count = b % n ? MPI_UNDEFINED : b / n;
		return MPI_SUCCESS;
	}
	if (datatype == MPI_DATATYPE_NULL) return gompi_error(MPI_COMM_SELF, MPI_ERR_TYPE, "MPI_Get_elements");
	int64_t e;
	int rc = gompi_go_type_elements((uintptr_t)datatype, b, &e);
	if (rc) return gompi_error(MPI_COMM_SELF, rc, "MPI_Get_elements");
	*count = e;
	return MPI_SUCCESS;
}

int PMPI_Get_elements_x(const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count) {
	return PMPI_Get_elements_c(status, datatype, count);
}

int PMPI_Get_elements(const MPI_Status *status, MPI_Datatype datatype, int *count) {
	MPI_Count c;
	int rc = PMPI_Get_elements_c(status, datatype, &c);
	if (rc == MPI_SUCCESS) *count = c > INT_MAX ? MPI_UNDEFINED : (int)c;
	return rc;
}

#define GOMPI_FILE_datatype
#include "aliases_gen.h"
