/*
 * mpi-ext.h: gompi's MPI extensions, for C and C++. Today one: ULFM's
 * fault-tolerance interface (User Level Failure Mitigation), with the
 * names, prototypes and feature macros Open MPI's mpi-ext.h gives it, so a
 * ULFM program written for Open MPI builds unchanged with gompicc:
 *
 *	#include <mpi.h>
 *	#include <mpi-ext.h>
 *	#if defined(OMPI_HAVE_MPI_EXT_FTMPI) || defined(MPIX_FT)
 *	    ... MPIX_Comm_revoke, MPIX_Comm_shrink, MPIX_Comm_agree ...
 *	#endif
 *
 * The calls are package mpi's fault-tolerance API (Comm.Revoke, IsRevoked,
 * Shrink, Ishrink, Agree, Iagree, AckFailed, GetFailed); see the package
 * doc of gompi/mpi for their semantics, which are ULFM's. Every call of
 * the library whose operation fails because a process failed returns
 * MPIX_ERR_PROC_FAILED, an AnySource receive's MPI_Wait or MPI_Test
 * while a failure is unacknowledged MPIX_ERR_PROC_FAILED_PENDING (the
 * request stays active), and an operation on a revoked communicator
 * MPIX_ERR_REVOKED, each through the communicator's error handler: set
 * MPI_ERRORS_RETURN on it to see them (the default,
 * MPI_ERRORS_ARE_FATAL, ends the job). MPI_Error_class and
 * MPI_Error_string know the three classes.
 *
 * The error classes take MPICH's numbers (101, 102, 103: below
 * MPI_ERR_LASTCODE, above every standard class); Open MPI's are 75-77,
 * which only a program that prints them would see.
 */
#ifndef GOMPI_MPI_EXT_H
#define GOMPI_MPI_EXT_H 1

#include "mpi.h"

#if defined(c_plusplus) || defined(__cplusplus)
extern "C" {
#endif

/* Open MPI's feature macros: the extensions exist, the ftmpi one is in,
 * and the MPI-4.1-era names of get_failed / ack_failed / ishrink too. */
#define OMPI_HAVE_MPI_EXT 1
#define OMPI_HAVE_MPI_EXT_FTMPI 1
#define OMPI_HAVE_MPIX_COMM_GET_FAILED 1
#define OMPI_HAVE_MPIX_COMM_ACK_FAILED 1
#define OMPI_HAVE_MPIX_COMM_ISHRINK 1

/* Error classes. */
#define MPIX_ERR_PROC_FAILED 101
#define MPIX_ERR_PROC_FAILED_PENDING 102
#define MPIX_ERR_REVOKED 103

/* MPIX_FT: the predefined attribute key whose value (an int, through
 * MPI_Comm_get_attr) says whether fault tolerance is on: always 1 in
 * gompi, whose failure detector always runs. Open MPI's MPI_FT; the
 * macro doubles as ULFM's feature test. */
#define MPIX_FT 520

/* Revoke comm everywhere: every pending and later operation on it, on
 * every member, fails with MPIX_ERR_REVOKED, except agree and shrink. */
int MPIX_Comm_revoke(MPI_Comm comm);
/* *flag = whether comm is revoked (as this process knows). */
int MPIX_Comm_is_revoked(MPI_Comm comm, int *flag);
/* A communicator of comm's surviving members, agreed by them all; works
 * on a revoked communicator. */
int MPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm);
/* MPIX_Comm_shrink started; *newcomm is set when the request completes
 * (MPI_Wait/MPI_Test); start no other communicator creation before. */
int MPIX_Comm_ishrink(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request);
/* Acknowledge every failure of comm known here (the pre-4.1 name of
 * MPIX_Comm_ack_failed(comm, all, ...)). */
int MPIX_Comm_failure_ack(MPI_Comm comm);
/* The group of the failures acknowledged on comm. */
int MPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp);
/* The group of comm's members known failed here, in the order this
 * process learned of them. */
int MPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgroup);
/* Acknowledge the first num_to_ack failures of MPIX_Comm_get_failed's
 * group; *num_acked = how many are acknowledged in all. */
int MPIX_Comm_ack_failed(MPI_Comm comm, int num_to_ack, int *num_acked);
/* Fault-tolerant agreement: *flag becomes the bitwise AND of the
 * survivors' flags; MPIX_ERR_PROC_FAILED when a member failed whose
 * failure this process had not acknowledged (the flag is still agreed). */
int MPIX_Comm_agree(MPI_Comm comm, int *flag);
/* MPIX_Comm_agree started; *flag is set when the request completes. */
int MPIX_Comm_iagree(MPI_Comm comm, int *flag, MPI_Request *request);

int PMPIX_Comm_revoke(MPI_Comm comm);
int PMPIX_Comm_is_revoked(MPI_Comm comm, int *flag);
int PMPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm);
int PMPIX_Comm_ishrink(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request);
int PMPIX_Comm_failure_ack(MPI_Comm comm);
int PMPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp);
int PMPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgroup);
int PMPIX_Comm_ack_failed(MPI_Comm comm, int num_to_ack, int *num_acked);
int PMPIX_Comm_agree(MPI_Comm comm, int *flag);
int PMPIX_Comm_iagree(MPI_Comm comm, int *flag, MPI_Request *request);

#if defined(c_plusplus) || defined(__cplusplus)
}
#endif

#endif /* GOMPI_MPI_EXT_H */
