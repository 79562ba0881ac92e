/*
 * gompi_cr.h: application-level checkpoint/restart for C and C++
 * programs: package gompi/cr's API (see its package doc), in the spirit
 * of SCR's and VeloC's. A program protects the memory that describes its
 * progress, marks safe points, and gompi saves those regions (and the
 * library's own state: messages in flight, communicators) when the job's
 * coordinator asks (gompi-checkpoint) or when the program asks itself:
 *
 *	MPI_Init(&argc, &argv);
 *	MPI_Comm_split(MPI_COMM_WORLD, color, key, &st.rows); // before the first safe point
 *	GOMPI_CR_Protect("state", &st, sizeof st);            // on a restart: filled here
 *	GOMPI_CR_Protect("grid", grid, n * sizeof(double));
 *	for (; st.step < steps; st.step++) {
 *		GOMPI_CR_Safe_point();
 *		... one step ...
 *	}
 *
 * Run under `gompirun -am ft-enable-cr`: a program that calls GOMPI_CR_
 * functions gets crs=self, whose snapshots hold the protected regions
 * only (small, and restartable on another layout or BTL), as a Go program
 * importing package cr does. gompi-restart starts the program again:
 * MPI_Init restores the library, each GOMPI_CR_Protect fills its region
 * from the snapshot, and the first safe point reaching the saved count is
 * the point the rank was saved at.
 *
 * MPI handles in protected memory. Every handle gompi gives out is
 * deterministic: a communicator's follows from its context id, which the
 * restarted library gives back for the same creation calls (MPI_Comm_dup,
 * MPI_Comm_split, MPI_Comm_free... are replayed from the snapshot's log);
 * a derived datatype's, a group's, an op's from their creation order. So
 * a program that makes the same creation calls before its first safe
 * point on every run (it must for communicators: package cr checks the
 * replay and names a difference) finds the handles it saved valid after
 * a restart: the values restored into its protected structs are the ones
 * the restarted library has just given out again. The library checks it:
 * each snapshot records the communicators and derived datatypes the
 * program held, and the first GOMPI_CR_Safe_point (or Checkpoint) of a
 * restarted run fails, naming the handle, when one of them is missing or
 * names an object of another size or extent. Requests cannot be saved (a
 * safe point has none in flight).
 *
 * Under crs=criu (named on the command line) the calls behave as package
 * cr documents for crs=criu: the process is saved whole, at any moment;
 * regions are registered but never read back, safe points return at
 * once, callbacks do not run, GOMPI_CR_Need_checkpoint never says yes and
 * GOMPI_CR_Checkpoint is refused (take checkpoints with gompi-checkpoint).
 *
 * Every function returns MPI_SUCCESS, or an MPI error class (MPI_ERR_ARG
 * for an argument, MPI_ERR_OTHER else) after printing why to standard
 * error; none goes through an error handler. All must be called between
 * MPI_Init and MPI_Finalize, from any thread.
 */
#ifndef GOMPI_CR_H
#define GOMPI_CR_H 1

#include <stddef.h>

#include "mpi.h"

#if defined(c_plusplus) || defined(__cplusplus)
extern "C" {
#endif

#define GOMPI_CR 1 /* this header's version */

/* GOMPI_CR_Checkpoint's flags. */
#define GOMPI_CR_TERM 1 /* end the job once it is saved (every rank exits with status 0) */

/* Protect the size bytes at ptr under name: saved at every checkpoint as
 * they are then; on a restart, filled from the snapshot before this call
 * returns (the snapshot's region must have the same size). The memory is
 * the program's (static, stack of main, malloc'd) and must stay valid and
 * at the same address until MPI_Finalize: gompi reads it in place at each
 * checkpoint, without copying it first, and never moves or frees it. A
 * name is protected once; every name the snapshot holds must be protected
 * again before the restart point. */
int GOMPI_CR_Protect(const char *name, void *ptr, size_t size);

/* A safe point: where the protected memory describes the rank's progress
 * and it has no request in flight. Every rank must reach its n-th safe
 * point without any other passing its own n-th (the top of a loop whose
 * steps communicate). A pending checkpoint is taken here; on a restart,
 * the safe point reaching the saved count is where the rank goes on. */
int GOMPI_CR_Safe_point(void);

/* A checkpoint of the whole job requested by the program: every rank
 * calls it at the same program point (it counts as a safe point) with the
 * same name, which the snapshot records (GOMPI_CR_Restart_info returns
 * it). On return, ref (of reflen bytes, may be NULL) holds the snapshot's
 * reference for gompi-restart and *seq (may be NULL) its sequence. With
 * GOMPI_CR_TERM the job ends once saved and the call does not return. On
 * a restart from this snapshot it returns at once, with the reference and
 * sequence restarted from. */
int GOMPI_CR_Checkpoint(const char *name, int flags, char *ref, int reflen, int *seq);

/* *flag = 1 while the job's coordinator wants the rank at a safe point
 * (gompi-checkpoint was run): a program whose steps are long, or that
 * idles, calls GOMPI_CR_Safe_point when it says so. Never blocks. */
int GOMPI_CR_Need_checkpoint(int *flag);

/* *flag = 1 when this run is a restart from a snapshot. */
int GOMPI_CR_Is_restart(int *flag);

/* What the rank was restarted from: the snapshot's reference (ref, reflen
 * bytes), sequence (*seq) and the name of the GOMPI_CR_Checkpoint that
 * took it (name, namelen bytes; "" for one gompi-checkpoint took). Any
 * output may be NULL. MPI_ERR_OTHER when this is not a restart. */
int GOMPI_CR_Restart_info(char *ref, int reflen, int *seq, char *name, int namelen);

/* Callbacks, in the INC stack's order (package cr): fn(dir, arg) runs at
 * every checkpoint of this rank once the library is quiesced, and writes
 * files of its own into dir, the rank's snapshot directory (regular
 * files; their sizes and checksums are recorded and checked at restart):
 * for state that is not one memory region. A non-zero return fails the
 * checkpoint. Callbacks must not call MPI. */
typedef int(GOMPI_CR_Dir_function)(const char *dir, void *arg);
typedef int(GOMPI_CR_Function)(void *arg);
int GOMPI_CR_On_checkpoint(GOMPI_CR_Dir_function *fn, void *arg);
/* fn(arg) runs after each checkpoint this rank saved and goes on from. */
int GOMPI_CR_On_continue(GOMPI_CR_Function *fn, void *arg);
/* On a restart, before the restart point: fn(dir, arg) runs at once with
 * the snapshot directory (its files verified), to read back what the
 * GOMPI_CR_On_checkpoint callback wrote. Otherwise nothing happens. */
int GOMPI_CR_On_restart(GOMPI_CR_Dir_function *fn, void *arg);

#if defined(c_plusplus) || defined(__cplusplus)
}
#endif

#endif /* GOMPI_CR_H */
