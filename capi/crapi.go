package capi

/*
#include <stdint.h>
#include <stdlib.h>
int gompi_cr_call_dir(void *fn, const char *dir, void *arg);
int gompi_cr_call(void *fn, void *arg);
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"gompi/cr"
)

// gompi_cr.h's functions (crapi.c) over package cr.
//
// A protected C region is registered with cr.Protect as a []byte that
// views the C memory in place (unsafe.Slice over the C pointer): cr saves
// a byte slice as its raw memory, reading it at each checkpoint, so
// nothing is copied beforehand. The memory is C's: Go's collector
// neither moves nor frees it, so the view needs no pinning; the C
// program keeps it valid until MPI_Finalize (gompi_cr.h says so). On a
// restart cr.Protect replaces the registered slice with the snapshot's
// bytes; the region's code copies them into the C memory and points the
// registered slice back at it, so later checkpoints save the C memory
// again.

// crState is the C programs' C/R state: the regions, by name, and the
// name of the program's last GOMPI_CR_Checkpoint, itself protected so a
// restart can say which checkpoint it came from.
var crState struct {
	mu       sync.Mutex
	started  bool
	regions  map[string]*[]byte
	name     string // protected: the checkpoint being taken's name
	restored string // name as the snapshot restarted from held it
	handles  handleTable
	// verify: a restarted run has not yet checked the saved handles
	// (at its first safe point)
	verify bool
}

// handleTable is the communicators and derived datatypes the program
// held at a checkpoint, protected beside its regions: at the first safe
// point of a restarted run each must exist again, the same, or the
// handles its protected memory holds would name other objects (a
// datatype made in another order) or none.
type handleTable struct {
	Comms []handleRec // A: size, B: rank
	Types []handleRec // A: size, B: extent
}

type handleRec struct {
	H    uint64
	A, B int64
}

// currentHandles lists the handles the library has given out now.
func currentHandles() handleTable {
	var t handleTable
	lib.mu.Lock()
	for h, c := range lib.comms {
		t.Comms = append(t.Comms, handleRec{H: uint64(h), A: int64(c.Size()), B: int64(c.Rank())})
	}
	lib.mu.Unlock()
	types.mu.Lock()
	for h, ct := range types.m {
		t.Types = append(t.Types, handleRec{H: uint64(h), A: int64(ct.t.Size()), B: int64(ct.t.Extent())})
	}
	types.mu.Unlock()
	return t
}

// verifyHandles checks that every handle of the snapshot's table names
// the same kind of object now.
func verifyHandles(saved handleTable) error {
	now := currentHandles()
	for _, k := range []struct {
		what        string
		saved, have []handleRec
	}{{"communicator", saved.Comms, now.Comms}, {"datatype", saved.Types, now.Types}} {
		have := map[uint64]handleRec{}
		for _, r := range k.have {
			have[r.H] = r
		}
		for _, r := range k.saved {
			if got, ok := have[r.H]; !ok || got != r {
				return fmt.Errorf("restart: the snapshot's %s handle %#x (%d, %d) is not the same now (%v: %d, %d): "+
					"make the same communicator and datatype creation calls, in the same order, before the first safe point",
					k.what, r.H, r.A, r.B, ok, got.A, got.B)
			}
		}
	}
	return nil
}

const crHandlesKey = "gompi/capi.handles"

// crHandles protects the handle table, refreshed at each checkpoint (the
// callbacks run before the protected values are encoded); on a restart
// the first safe point verifies it. crState.mu is held.
func crHandles(c *cr.Coordinator) error {
	if err := c.Protect(crHandlesKey, &crState.handles); err != nil {
		return err
	}
	crState.verify = c.IsRestart()
	return c.OnCheckpoint(func(string) error {
		t := currentHandles()
		crState.mu.Lock()
		crState.handles = t
		crState.mu.Unlock()
		return nil
	})
}

// crVerify verifies the restored handle table once, at the first safe
// point of a restarted run.
func crVerify() error {
	crState.mu.Lock()
	defer crState.mu.Unlock()
	if !crState.verify {
		return nil
	}
	crState.verify = false
	return verifyHandles(crState.handles)
}

// crNameKey is the protected value holding the checkpoint's name: a name
// no C program's region may take, as crHandlesKey.
const crNameKey = "gompi/capi.checkpoint-name"

// crStart attaches package cr on the first call and protects the
// checkpoint name; crState.mu is held.
func crStart() (*cr.Coordinator, error) {
	c, err := cr.Default()
	if err != nil {
		return nil, err
	}
	if crState.started {
		return c, nil
	}
	crState.regions = map[string]*[]byte{}
	if err := c.Protect(crNameKey, &crState.name); err != nil {
		return nil, err
	}
	crState.restored = crState.name
	if err := crHandles(c); err != nil {
		return nil, err
	}
	crState.started = true
	return c, nil
}

// crCoordinator returns the attached coordinator.
func crCoordinator() (*cr.Coordinator, error) {
	crState.mu.Lock()
	defer crState.mu.Unlock()
	return crStart()
}

// crCode reports err on standard error, as gompi_cr.h promises, and maps
// it to an MPI error class.
func crCode(fn string, err error) C.int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(os.Stderr, "gompi: %s: %v\n", fn, err)
	if errors.Is(err, errBadArg) {
		return errArg
	}
	return errOther
}

var errBadArg = errors.New("invalid argument")

//export gompi_go_cr_protect
func gompi_go_cr_protect(name *C.char, p unsafe.Pointer, size C.size_t) C.int {
	n := C.GoString(name)
	if n == "" || n == crNameKey || n == crHandlesKey || (p == nil && size > 0) {
		return crCode("GOMPI_CR_Protect", fmt.Errorf("%w: name %q, %d bytes at %p", errBadArg, n, size, p))
	}
	crState.mu.Lock()
	defer crState.mu.Unlock()
	c, err := crStart()
	if err != nil {
		return crCode("GOMPI_CR_Protect", err)
	}
	view := unsafe.Slice((*byte)(p), int(size))
	region := new([]byte)
	*region = view
	if err := c.Protect(n, region); err != nil {
		return crCode("GOMPI_CR_Protect", err)
	}
	crState.regions[n] = region
	if saved := *region; unsafe.SliceData(saved) != unsafe.SliceData(view) || len(saved) != len(view) {
		// Filled from the snapshot: into the C memory, and the view back.
		*region = view
		if len(saved) != len(view) {
			return crCode("GOMPI_CR_Protect", fmt.Errorf("restart: region %q was saved with %d bytes, the program protects %d", n, len(saved), len(view)))
		}
		copy(view, saved)
	}
	return 0
}

//export gompi_go_cr_safe_point
func gompi_go_cr_safe_point() C.int {
	c, err := crCoordinator()
	if err == nil {
		err = crVerify()
	}
	if err == nil {
		err = c.SafePoint()
	}
	return crCode("GOMPI_CR_Safe_point", err)
}

// putString copies s into the C buffer of n bytes at p, cut to fit and
// NUL-ended; nothing for a NULL buffer.
func putString(p *C.char, n C.int, s string) {
	if p == nil || n <= 0 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n))
	k := copy(b[:len(b)-1], s)
	b[k] = 0
}

//export gompi_go_cr_checkpoint
func gompi_go_cr_checkpoint(name *C.char, flags C.int, ref *C.char, reflen C.int, seq *C.int) C.int {
	crState.mu.Lock()
	c, err := crStart()
	if err == nil {
		crState.name = C.GoString(name)
	}
	crState.mu.Unlock()
	if err == nil {
		err = crVerify()
	}
	if err != nil {
		return crCode("GOMPI_CR_Checkpoint", err)
	}
	res, err := c.Checkpoint(context.Background(), cr.Options{Term: flags&1 != 0})
	if err != nil {
		return crCode("GOMPI_CR_Checkpoint", err)
	}
	putString(ref, reflen, filepath.Join(res.Dir, res.Ref))
	if seq != nil {
		*seq = C.int(res.Seq)
	}
	return 0
}

//export gompi_go_cr_need_checkpoint
func gompi_go_cr_need_checkpoint(flag *C.int) C.int {
	c, err := crCoordinator()
	if err != nil {
		return crCode("GOMPI_CR_Need_checkpoint", err)
	}
	*flag = 0
	select {
	case <-c.Requested():
		*flag = 1
	default:
	}
	return 0
}

//export gompi_go_cr_is_restart
func gompi_go_cr_is_restart(flag *C.int) C.int {
	c, err := crCoordinator()
	if err != nil {
		return crCode("GOMPI_CR_Is_restart", err)
	}
	*flag = 0
	if c.IsRestart() {
		*flag = 1
	}
	return 0
}

//export gompi_go_cr_restart_info
func gompi_go_cr_restart_info(ref *C.char, reflen C.int, seq *C.int, name *C.char, namelen C.int) C.int {
	c, err := crCoordinator()
	if err != nil {
		return crCode("GOMPI_CR_Restart_info", err)
	}
	info, ok := c.RestartInfo()
	if !ok {
		return crCode("GOMPI_CR_Restart_info", errors.New("this run is no restart"))
	}
	putString(ref, reflen, filepath.Join(info.Ref.Dir, info.Ref.Name))
	if seq != nil {
		*seq = C.int(info.Seq)
	}
	crState.mu.Lock()
	putString(name, namelen, crState.restored)
	crState.mu.Unlock()
	return 0
}

// The callbacks: C function pointers called through crapi.c's
// trampolines. kind: 0 on checkpoint, 1 on continue, 2 on restart.
//
//export gompi_go_cr_callback
func gompi_go_cr_callback(kind C.int, fn, arg unsafe.Pointer) C.int {
	fns := [...]string{"GOMPI_CR_On_checkpoint", "GOMPI_CR_On_continue", "GOMPI_CR_On_restart"}
	if kind < 0 || int(kind) >= len(fns) {
		return errArg
	}
	if fn == nil {
		return crCode(fns[kind], fmt.Errorf("%w: a NULL function", errBadArg))
	}
	c, err := crCoordinator()
	if err != nil {
		return crCode(fns[kind], err)
	}
	withDir := func(dir string) error {
		d := C.CString(dir)
		defer C.free(unsafe.Pointer(d))
		if rc := C.gompi_cr_call_dir(fn, d, arg); rc != 0 {
			return fmt.Errorf("the C callback returned %d", int(rc))
		}
		return nil
	}
	switch kind {
	case 0:
		err = c.OnCheckpoint(withDir)
	case 1:
		err = c.OnContinue(func() error {
			if rc := C.gompi_cr_call(fn, arg); rc != 0 {
				return fmt.Errorf("the C callback returned %d", int(rc))
			}
			return nil
		})
	case 2:
		err = c.OnRestart(withDir)
	}
	return crCode(fns[kind], err)
}
