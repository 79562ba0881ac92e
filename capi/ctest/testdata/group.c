/* Groups: Comm_group, size/rank, incl/excl/union/intersection/difference,
 * range_incl, translate_ranks, compare, free. */
#include "ctest.h"

static void show(const char *what, MPI_Group g)
{
	int n, r;
	MPI_Group_size(g, &n);
	MPI_Group_rank(g, &r);
	ct_out("%s size %d rank %d", what, n, r == MPI_UNDEFINED ? -1 : r);
}

int main(int argc, char **argv)
{
	MPI_Group w, a, b, u, x, d, e, rg;
	int s, i, n, res, *in, *out, range[1][3];

	MPI_Init(&argc, &argv);
	ct_begin(argc, argv);
	s = ct_size;
	MPI_Comm_group(MPI_COMM_WORLD, &w);
	show("world", w);
	in = malloc(sizeof(int) * s), out = malloc(sizeof(int) * s);
	/* a: ranks 0, 2, 4 ... reversed; b: the upper half */
	for (i = 0, n = 0; i < s; i += 2)
		in[n++] = s - 1 - i;
	MPI_Group_incl(w, n, in, &a);
	show("incl", a);
	for (i = 0, n = 0; i < s / 2; i++)
		in[n++] = i;
	MPI_Group_excl(w, n, in, &b);
	show("excl", b);
	MPI_Group_union(a, b, &u);
	show("union", u);
	MPI_Group_intersection(a, b, &x);
	show("intersection", x);
	MPI_Group_difference(a, b, &d);
	show("difference", d);
	range[0][0] = 0, range[0][1] = s - 1, range[0][2] = 3;
	MPI_Group_range_incl(w, 1, range, &rg);
	show("range_incl", rg);
	for (i = 0; i < s; i++)
		in[i] = i;
	MPI_Group_translate_ranks(w, s, in, u, out);
	for (i = 0; i < s; i++)
		ct_out("translate %d -> %d", i, out[i] == MPI_UNDEFINED ? -1 : out[i]);
	MPI_Group_compare(w, w, &res);
	ct_out("compare w w %s", ct_name(res));
	MPI_Group_compare(w, u, &res);
	ct_out("compare w union %s", ct_name(res));
	MPI_Group_compare(a, b, &res);
	ct_out("compare a b %s", ct_name(res));
	MPI_Group_excl(w, 0, in, &e);
	MPI_Group_compare(w, e, &res);
	ct_out("compare w excl-none %s", ct_name(res));
	MPI_Group_size(MPI_GROUP_EMPTY, &n);
	ct_out("empty size %d", n);
	MPI_Group_free(&a);
	ct_out("freed null %d", a == MPI_GROUP_NULL);
	MPI_Group_free(&b), MPI_Group_free(&u), MPI_Group_free(&x);
	MPI_Group_free(&d), MPI_Group_free(&e), MPI_Group_free(&rg), MPI_Group_free(&w);
	free(in), free(out);
	return ct_end();
}
