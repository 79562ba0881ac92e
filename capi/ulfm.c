/*
 * ulfm.c: ULFM's MPIX_ calls (mpi-ext.h) over package mpi's fault
 * tolerance (ulfm.go). Not in the standard's function list: their weak
 * aliases are here, not generated.
 */
#include "_cgo_export.h"
#include "gompi.h"

#pragma weak MPIX_Comm_revoke = PMPIX_Comm_revoke
#pragma weak MPIX_Comm_is_revoked = PMPIX_Comm_is_revoked
#pragma weak MPIX_Comm_shrink = PMPIX_Comm_shrink
#pragma weak MPIX_Comm_ishrink = PMPIX_Comm_ishrink
#pragma weak MPIX_Comm_failure_ack = PMPIX_Comm_failure_ack
#pragma weak MPIX_Comm_failure_get_acked = PMPIX_Comm_failure_get_acked
#pragma weak MPIX_Comm_get_failed = PMPIX_Comm_get_failed
#pragma weak MPIX_Comm_ack_failed = PMPIX_Comm_ack_failed
#pragma weak MPIX_Comm_agree = PMPIX_Comm_agree
#pragma weak MPIX_Comm_iagree = PMPIX_Comm_iagree

int PMPIX_Comm_revoke(MPI_Comm comm) {
	CHECK_COMM(comm, "MPIX_Comm_revoke");
	return gompi_error(comm, gompi_go_comm_revoke((uintptr_t)comm), "MPIX_Comm_revoke");
}

int PMPIX_Comm_is_revoked(MPI_Comm comm, int *flag) {
	CHECK_COMM(comm, "MPIX_Comm_is_revoked");
	if (flag == NULL) return gompi_error(comm, MPI_ERR_ARG, "MPIX_Comm_is_revoked");
	return gompi_error(comm, gompi_go_comm_is_revoked((uintptr_t)comm, flag), "MPIX_Comm_is_revoked");
}

int PMPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm) {
	CHECK_COMM(comm, "MPIX_Comm_shrink");
	if (newcomm == NULL) return gompi_error(comm, MPI_ERR_ARG, "MPIX_Comm_shrink");
	return gompi_error(comm, gompi_go_comm_shrink((uintptr_t)comm, (uintptr_t *)newcomm, NULL), "MPIX_Comm_shrink");
}

int PMPIX_Comm_ishrink(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request) {
	CHECK_COMM(comm, "MPIX_Comm_ishrink");
	if (newcomm == NULL || request == NULL) return gompi_error(comm, MPI_ERR_ARG, "MPIX_Comm_ishrink");
	return gompi_error(comm, gompi_go_comm_shrink((uintptr_t)comm, (uintptr_t *)newcomm, (uintptr_t *)request),
			   "MPIX_Comm_ishrink");
}

int PMPIX_Comm_failure_ack(MPI_Comm comm) {
	CHECK_COMM(comm, "MPIX_Comm_failure_ack");
	int acked;
	return gompi_error(comm, gompi_go_comm_ack_failed((uintptr_t)comm, -1, &acked), "MPIX_Comm_failure_ack");
}

int PMPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp) {
	CHECK_COMM(comm, "MPIX_Comm_failure_get_acked");
	if (failedgrp == NULL) return gompi_error(comm, MPI_ERR_ARG, "MPIX_Comm_failure_get_acked");
	return gompi_error(comm, gompi_go_comm_get_failed((uintptr_t)comm, 1, (uintptr_t *)failedgrp),
			   "MPIX_Comm_failure_get_acked");
}

int PMPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgroup) {
	CHECK_COMM(comm, "MPIX_Comm_get_failed");
	if (failedgroup == NULL) return gompi_error(comm, MPI_ERR_ARG, "MPIX_Comm_get_failed");
	return gompi_error(comm, gompi_go_comm_get_failed((uintptr_t)comm, 0, (uintptr_t *)failedgroup),
			   "MPIX_Comm_get_failed");
}

int PMPIX_Comm_ack_failed(MPI_Comm comm, int num_to_ack, int *num_acked) {
	CHECK_COMM(comm, "MPIX_Comm_ack_failed");
	if (num_to_ack < 0 || num_acked == NULL) return gompi_error(comm, MPI_ERR_ARG, "MPIX_Comm_ack_failed");
	return gompi_error(comm, gompi_go_comm_ack_failed((uintptr_t)comm, num_to_ack, num_acked), "MPIX_Comm_ack_failed");
}

int PMPIX_Comm_agree(MPI_Comm comm, int *flag) {
	CHECK_COMM(comm, "MPIX_Comm_agree");
	if (flag == NULL) return gompi_error(comm, MPI_ERR_ARG, "MPIX_Comm_agree");
	return gompi_error(comm, gompi_go_comm_agree((uintptr_t)comm, flag, NULL), "MPIX_Comm_agree");
}

int PMPIX_Comm_iagree(MPI_Comm comm, int *flag, MPI_Request *request) {
	CHECK_COMM(comm, "MPIX_Comm_iagree");
	if (flag == NULL || request == NULL) return gompi_error(comm, MPI_ERR_ARG, "MPIX_Comm_iagree");
	return gompi_error(comm, gompi_go_comm_agree((uintptr_t)comm, flag, (uintptr_t *)request), "MPIX_Comm_iagree");
}
