package boot

import (
	"debug/elf"
	"debug/gosym"
	"errors"
	"fmt"
	"strings"
)

// crPackage is the import path of gompi's application-level C/R API.
// A program that links it registered its state and safe points (or asks
// for checkpoints itself), which is what crs self saves.
const crPackage = "gompi/cr"

// programUsesCR reports whether the program at path is a Go program
// linking package cr, read from its function table (.gopclntab, which
// stripping keeps), or a C or C++ program calling gompi_cr.h (package
// cr's API for C, in libmpi), so that gompirun can choose the job's CRS
// before any rank runs. Another program (a C program without
// gompi_cr.h, a script) has no C/R code of gompi's. An error says the
// file cannot be read as an executable at all: the caller then keeps the
// priorities' choice.
func programUsesCR(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		if _, ok := errors.AsType[*elf.FormatError](err); ok {
			return false, nil // not ELF: a script or another format
		}
		return false, fmt.Errorf("read program %s: %w", path, err)
	}
	defer f.Close()
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		return cProgramUsesCR(f), nil // ELF but not Go (C, C++, ...)
	}
	data, err := pcln.Data()
	if err != nil {
		return false, fmt.Errorf("read program %s: function table: %w", path, err)
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return false, fmt.Errorf("read program %s: function table: %w", path, err)
	}
	for _, fn := range tab.Funcs {
		if strings.HasPrefix(fn.Name, crPackage+".") {
			return true, nil
		}
	}
	return false, nil
}

// cPrefix starts the name of every function of gompi_cr.h.
const cPrefix = "GOMPI_CR_"

// cProgramUsesCR reports whether an ELF program that is not Go imports a
// function of gompi_cr.h from libmpi (its dynamic symbols, which
// stripping keeps).
func cProgramUsesCR(f *elf.File) bool {
	syms, err := f.ImportedSymbols()
	if err != nil {
		return false // no dynamic symbols: a static program, not one of libmpi's
	}
	for _, s := range syms {
		if strings.HasPrefix(s.Name, cPrefix) {
			return true
		}
	}
	return false
}
