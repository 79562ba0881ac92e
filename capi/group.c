/*
 * group.c: process groups (MPI_Group) and the communicator calls that take
 * or give one. Groups live in Go (package mpi's Group values); C holds
 * handles GOMPI_HANDLE(GOMPI_KIND_GROUP, n), n a per-process creation
 * sequence number, so a run repeated the same way sees the same handles.
 */
#include "_cgo_export.h"
#include "gompi.h"
#include <string.h>

#define CHECK_GROUP(g, fn)                                                           \
	do {                                                                         \
		gompi_check_init(fn);                                                \
		if (!gompi_go_group_known((uintptr_t)(g)))                           \
			return gompi_error(MPI_COMM_WORLD, MPI_ERR_GROUP, fn);       \
	} while (0)

static int new_group(int rc, uintptr_t h, MPI_Group *out, const char *fn) {
	if (rc != MPI_SUCCESS) return gompi_error(MPI_COMM_WORLD, rc, fn);
	*out = (MPI_Group)h;
	return MPI_SUCCESS;
}

int PMPI_Comm_group(MPI_Comm comm, MPI_Group *group) {
	gompi_check_init("MPI_Comm_group");
	if (!gompi_comm_known(comm)) return gompi_error(MPI_COMM_SELF, MPI_ERR_COMM, "MPI_Comm_group");
	uintptr_t h;
	int rc = gompi_go_comm_group((uintptr_t)comm, &h);
	if (rc != MPI_SUCCESS) return gompi_error(comm, rc, "MPI_Comm_group");
	*group = (MPI_Group)h;
	return MPI_SUCCESS;
}

int PMPI_Group_size(MPI_Group group, int *size) {
	CHECK_GROUP(group, "MPI_Group_size");
	*size = gompi_go_group_size((uintptr_t)group);
	return MPI_SUCCESS;
}

int PMPI_Group_rank(MPI_Group group, int *rank) {
	CHECK_GROUP(group, "MPI_Group_rank");
	*rank = gompi_go_group_rank((uintptr_t)group);
	return MPI_SUCCESS;
}

int PMPI_Group_free(MPI_Group *group) {
	CHECK_GROUP(*group, "MPI_Group_free");
	if (*group == MPI_GROUP_EMPTY) return gompi_error(MPI_COMM_WORLD, MPI_ERR_GROUP, "MPI_Group_free");
	gompi_go_group_free((uintptr_t)*group);
	*group = MPI_GROUP_NULL;
	return MPI_SUCCESS;
}

int PMPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup) {
	CHECK_GROUP(group, "MPI_Group_incl");
	if (n < 0) return gompi_error(MPI_COMM_WORLD, MPI_ERR_ARG, "MPI_Group_incl");
	uintptr_t h;
	int rc = gompi_go_group_incl((uintptr_t)group, n, (int *)ranks, 0, &h);
	return new_group(rc, h, newgroup, "MPI_Group_incl");
}

int PMPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup) {
	CHECK_GROUP(group, "MPI_Group_excl");
	if (n < 0) return gompi_error(MPI_COMM_WORLD, MPI_ERR_ARG, "MPI_Group_excl");
	uintptr_t h;
	int rc = gompi_go_group_incl((uintptr_t)group, n, (int *)ranks, 1, &h);
	return new_group(rc, h, newgroup, "MPI_Group_excl");
}

int PMPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup) {
	CHECK_GROUP(group, "MPI_Group_range_incl");
	if (n < 0) return gompi_error(MPI_COMM_WORLD, MPI_ERR_ARG, "MPI_Group_range_incl");
	uintptr_t h;
	int rc = gompi_go_group_range((uintptr_t)group, n, &ranges[0][0], 0, &h);
	return new_group(rc, h, newgroup, "MPI_Group_range_incl");
}

int PMPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup) {
	CHECK_GROUP(group, "MPI_Group_range_excl");
	if (n < 0) return gompi_error(MPI_COMM_WORLD, MPI_ERR_ARG, "MPI_Group_range_excl");
	uintptr_t h;
	int rc = gompi_go_group_range((uintptr_t)group, n, &ranges[0][0], 1, &h);
	return new_group(rc, h, newgroup, "MPI_Group_range_excl");
}

/* The set operations: 0 union, 1 intersection, 2 difference. */
static int setop(MPI_Group g1, MPI_Group g2, int op, MPI_Group *newgroup, const char *fn) {
	CHECK_GROUP(g1, fn);
	CHECK_GROUP(g2, fn);
	uintptr_t h;
	int rc = gompi_go_group_setop((uintptr_t)g1, (uintptr_t)g2, op, &h);
	return new_group(rc, h, newgroup, fn);
}

int PMPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup) {
	return setop(group1, group2, 0, newgroup, "MPI_Group_union");
}

int PMPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup) {
	return setop(group1, group2, 1, newgroup, "MPI_Group_intersection");
}

int PMPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup) {
	return setop(group1, group2, 2, newgroup, "MPI_Group_difference");
}

int PMPI_Group_compare(MPI_Group group1, MPI_Group group2, int *result) {
	CHECK_GROUP(group1, "MPI_Group_compare");
	CHECK_GROUP(group2, "MPI_Group_compare");
	*result = gompi_go_group_compare((uintptr_t)group1, (uintptr_t)group2);
	return MPI_SUCCESS;
}

int PMPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2, int ranks2[]) {
	CHECK_GROUP(group1, "MPI_Group_translate_ranks");
	CHECK_GROUP(group2, "MPI_Group_translate_ranks");
	if (n < 0) return gompi_error(MPI_COMM_WORLD, MPI_ERR_ARG, "MPI_Group_translate_ranks");
	int rc = gompi_go_group_translate((uintptr_t)group1, n, (int *)ranks1, (uintptr_t)group2, ranks2);
	return gompi_error(MPI_COMM_WORLD, rc, "MPI_Group_translate_ranks");
}

int PMPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
	gompi_check_init("MPI_Comm_create");
	if (!gompi_comm_known(comm)) return gompi_error(MPI_COMM_SELF, MPI_ERR_COMM, "MPI_Comm_create");
	if (!gompi_go_group_known((uintptr_t)group)) return gompi_error(comm, MPI_ERR_GROUP, "MPI_Comm_create");
	uintptr_t h;
	int rc = gompi_go_comm_create((uintptr_t)comm, (uintptr_t)group, &h);
	if (rc == MPI_SUCCESS) *newcomm = (MPI_Comm)h;
	return gompi_error(comm, rc, "MPI_Comm_create");
}

/* MPI_Comm_create_group is collective over group's members only; a
 * process outside the group gets MPI_COMM_NULL at once, as in MPICH. */
int PMPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm) {
	gompi_check_init("MPI_Comm_create_group");
	if (!gompi_comm_known(comm)) return gompi_error(MPI_COMM_SELF, MPI_ERR_COMM, "MPI_Comm_create_group");
	if (!gompi_go_group_known((uintptr_t)group)) return gompi_error(comm, MPI_ERR_GROUP, "MPI_Comm_create_group");
	if (tag < 0) return gompi_error(comm, MPI_ERR_TAG, "MPI_Comm_create_group");
	if (gompi_go_group_rank((uintptr_t)group) == MPI_UNDEFINED) {
		*newcomm = MPI_COMM_NULL;
		return MPI_SUCCESS;
	}
	uintptr_t h;
	int rc = gompi_go_comm_create_group((uintptr_t)comm, (uintptr_t)group, tag, &h);
	if (rc == MPI_SUCCESS) *newcomm = (MPI_Comm)h;
	return gompi_error(comm, rc, "MPI_Comm_create_group");
}

/* The split types: MPI_COMM_TYPE_SHARED by node. Of MPI-4's hardware
 * types gompi knows the node only: MPI_COMM_TYPE_HW_GUIDED with
 * mpi_hw_resource_type "mpi_shared_memory" is SHARED, any other resource
 * (or none named) gives MPI_COMM_NULL, as the standard has it for a type
 * the implementation does not support; MPI_COMM_TYPE_HW_UNGUIDED gives
 * the node's ranks when that is a proper part of comm, naming the resource
 * in info, and MPI_COMM_NULL when comm lies on one node. */
int PMPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm) {
	gompi_check_init("MPI_Comm_split_type");
	if (!gompi_comm_known(comm)) return gompi_error(MPI_COMM_SELF, MPI_ERR_COMM, "MPI_Comm_split_type");
	if (split_type == MPI_COMM_TYPE_HW_GUIDED) {
		char v[MPI_MAX_INFO_VAL + 1];
		int flag = 0;
		if (info != MPI_INFO_NULL) PMPI_Info_get(info, "mpi_hw_resource_type", MPI_MAX_INFO_VAL, v, &flag);
		split_type = flag && strcmp(v, "mpi_shared_memory") == 0 ? MPI_COMM_TYPE_SHARED : MPI_UNDEFINED;
	}
	uintptr_t h;
	int rc = gompi_go_comm_split_type((uintptr_t)comm, split_type, key, &h);
	if (rc == MPI_SUCCESS) *newcomm = (MPI_Comm)h;
	if (rc == MPI_SUCCESS && split_type == MPI_COMM_TYPE_HW_UNGUIDED && h != (uintptr_t)MPI_COMM_NULL &&
	    info != MPI_INFO_NULL)
		PMPI_Info_set(info, "mpi_hw_resource_type", "mpi_shared_memory");
	return gompi_error(comm, rc, "MPI_Comm_split_type");
}

#define GOMPI_FILE_group
#include "aliases_gen.h"
