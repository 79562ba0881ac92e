/*
 * crapi.c: gompi_cr.h, application-level checkpoint/restart for C, over
 * package cr (crapi.go). Not in the standard's function list: no PMPI_
 * names, no generated aliases.
 */
#include <stdio.h>

#include "_cgo_export.h"
#include "gompi.h"
#include "gompi_cr.h"

/* null_arg reports a NULL argument as the Go side reports its errors. */
static int null_arg(const char *fn, const char *arg) {
	fprintf(stderr, "gompi: %s: invalid argument: %s is NULL\n", fn, arg);
	return MPI_ERR_ARG;
}

/* The callbacks' trampolines: Go cannot call a C function pointer. */
int gompi_cr_call_dir(void *fn, const char *dir, void *arg) { return ((GOMPI_CR_Dir_function *)fn)(dir, arg); }
int gompi_cr_call(void *fn, void *arg) { return ((GOMPI_CR_Function *)fn)(arg); }

int GOMPI_CR_Protect(const char *name, void *ptr, size_t size) {
	gompi_check_init("GOMPI_CR_Protect");
	if (name == NULL) return null_arg("GOMPI_CR_Protect", "name");
	return gompi_go_cr_protect((char *)name, ptr, size);
}

int GOMPI_CR_Safe_point(void) {
	gompi_check_init("GOMPI_CR_Safe_point");
	return gompi_go_cr_safe_point();
}

int GOMPI_CR_Checkpoint(const char *name, int flags, char *ref, int reflen, int *seq) {
	gompi_check_init("GOMPI_CR_Checkpoint");
	return gompi_go_cr_checkpoint((char *)(name ? name : ""), flags, ref, reflen, seq);
}

int GOMPI_CR_Need_checkpoint(int *flag) {
	gompi_check_init("GOMPI_CR_Need_checkpoint");
	if (flag == NULL) return null_arg("GOMPI_CR_Need_checkpoint", "flag");
	return gompi_go_cr_need_checkpoint(flag);
}

int GOMPI_CR_Is_restart(int *flag) {
	gompi_check_init("GOMPI_CR_Is_restart");
	if (flag == NULL) return null_arg("GOMPI_CR_Is_restart", "flag");
	return gompi_go_cr_is_restart(flag);
}

int GOMPI_CR_Restart_info(char *ref, int reflen, int *seq, char *name, int namelen) {
	gompi_check_init("GOMPI_CR_Restart_info");
	return gompi_go_cr_restart_info(ref, reflen, seq, name, namelen);
}

int GOMPI_CR_On_checkpoint(GOMPI_CR_Dir_function *fn, void *arg) {
	gompi_check_init("GOMPI_CR_On_checkpoint");
	return gompi_go_cr_callback(0, (void *)fn, arg);
}

int GOMPI_CR_On_continue(GOMPI_CR_Function *fn, void *arg) {
	gompi_check_init("GOMPI_CR_On_continue");
	return gompi_go_cr_callback(1, (void *)fn, arg);
}

int GOMPI_CR_On_restart(GOMPI_CR_Dir_function *fn, void *arg) {
	gompi_check_init("GOMPI_CR_On_restart");
	return gompi_go_cr_callback(2, (void *)fn, arg);
}
