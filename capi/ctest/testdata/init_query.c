/* Init and the queries around it: Initialized, Finalized, Init_thread's
 * provided level, Query_thread, Is_thread_main, Get_version, Wtime/Wtick,
 * Get_processor_name, Pcontrol, Comm_size/rank of WORLD and SELF. */
#include "ctest.h"

int main(int argc, char **argv)
{
	int before, after, provided, q, mainthr, ver, sub, len, v, flag, fin;
	char name[MPI_MAX_PROCESSOR_NAME];
	double t0, t1;

	MPI_Initialized(&before);
	MPI_Finalized(&fin);
	MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
	ct_begin(argc, argv);
	MPI_Initialized(&after);
	ct_out("initialized before %d after %d finalized %d", before, after, fin);
	ct_check(provided >= MPI_THREAD_SINGLE && provided <= MPI_THREAD_MULTIPLE, "provided %d", provided);
	MPI_Query_thread(&q);
	ct_check(q == provided, "Query_thread %d, Init_thread gave %d", q, provided);
	MPI_Is_thread_main(&mainthr);
	ct_out("is_thread_main %d", mainthr);
	MPI_Get_version(&ver, &sub);
	ct_check(ver == MPI_VERSION && sub == MPI_SUBVERSION, "Get_version %d.%d, header %d.%d", ver, sub, MPI_VERSION, MPI_SUBVERSION);
	ct_out("version>=3 %d", ver >= 3);
	t0 = MPI_Wtime();
	t1 = MPI_Wtime();
	ct_check(t1 >= t0, "Wtime went back");
	ct_check(MPI_Wtick() > 0 && MPI_Wtick() < 1, "Wtick %g", MPI_Wtick());
	MPI_Get_processor_name(name, &len);
	ct_check(len > 0 && len < MPI_MAX_PROCESSOR_NAME && (int)strlen(name) == len, "processor name length %d", len);
	ct_out("pcontrol %d", MPI_Pcontrol(1) == MPI_SUCCESS);
	MPI_Comm_size(MPI_COMM_WORLD, &v);
	ct_out("world size %d", v);
	MPI_Comm_rank(MPI_COMM_WORLD, &v);
	ct_out("world rank %d", v);
	MPI_Comm_size(MPI_COMM_SELF, &v);
	ct_out("self size %d", v);
	MPI_Comm_rank(MPI_COMM_SELF, &v);
	ct_out("self rank %d", v);
	{
		int *ub;
		MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
		ct_check(flag && *ub >= 32767, "TAG_UB");
		ct_out("tag_ub>=32767 %d", flag && *ub >= 32767);
	}
	ct_out("any_source<0 %d proc_null!=any_source %d", MPI_ANY_SOURCE < 0, MPI_PROC_NULL != MPI_ANY_SOURCE);
	return ct_end();
}
