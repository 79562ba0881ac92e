// Package cc is the logic of gompi's compiler wrappers, gompicc (C) and
// gompicxx (C++), also installed as mpicc and mpicxx in
// PREFIX/share/gompi/wrappers. A wrapper runs the system's compiler with
// gompi's header folder and, when it links, libmpi_abi (-L, an rpath, -lmpi).
// It finds PREFIX from its own executable (PREFIX/bin/gompicc, through any
// symlink), so an installed prefix may move.
//
// It answers the queries build systems ask: Open MPI's --showme,
// --showme:compile, --showme:link, --showme:incdirs, --showme:libdirs,
// --showme:libs, --showme:version, and MPICH's -show, -compile-info,
// -link-info (CMake's FindMPI and autotools use them). $GOMPI_CC and
// $GOMPI_CXX name another compiler.
package cc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Lang is the language a wrapper compiles.
type Lang struct {
	Name     string // gompicc, gompicxx
	Env      string // the variable naming another compiler
	Compiler string // the default compiler
}

var (
	C   = Lang{Name: "gompicc", Env: "GOMPI_CC", Compiler: "cc"}
	CXX = Lang{Name: "gompicxx", Env: "GOMPI_CXX", Compiler: "c++"}
)

// Prefix returns the installation prefix: the folder above the one that
// holds the running executable, symlinks resolved.
func Prefix() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", err
	}
	return filepath.Dir(filepath.Dir(exe)), nil
}

// flags is what a wrapper adds: for compiling, and for linking.
type flags struct {
	compile, link  []string
	incdir, libdir string
}

func flagsFor(prefix string) flags {
	inc, lib := filepath.Join(prefix, "include"), filepath.Join(prefix, "lib")
	return flags{
		compile: []string{"-I" + inc},
		link:    []string{"-L" + lib, "-Wl,-rpath," + lib, "-lmpi"},
		incdir:  inc, libdir: lib,
	}
}

// links reports whether a compiler command with args links: not with -c,
// -S, -E or a dependency-only -M/-MM.
func links(args []string) bool {
	for _, a := range args {
		switch a {
		case "-c", "-S", "-E", "-M", "-MM":
			return false
		}
	}
	return true
}

// command returns the compiler command line for args.
func command(l Lang, f flags, args []string) []string {
	comp := l.Compiler
	if v := os.Getenv(l.Env); v != "" {
		comp = v
	}
	cmd := strings.Fields(comp)
	cmd = append(cmd, f.compile...)
	cmd = append(cmd, args...)
	if links(args) {
		cmd = append(cmd, f.link...)
	}
	return cmd
}

// query answers a wrapper's own option (the first argument); ok is false
// for anything else.
func query(l Lang, f flags, args []string, out io.Writer) (ok bool) {
	if len(args) == 0 {
		return false
	}
	rest := args[1:]
	line := func(words ...string) { fmt.Fprintln(out, strings.Join(words, " ")) }
	switch args[0] {
	case "--showme", "-showme", "-show":
		line(command(l, f, rest)...)
	case "--showme:compile", "-compile-info":
		if args[0] == "-compile-info" {
			line(command(l, f, append([]string{"-c"}, rest...))...)
		} else {
			line(f.compile...)
		}
	case "--showme:link", "-link-info":
		if args[0] == "-link-info" {
			line(command(l, f, rest)...)
		} else {
			line(f.link...)
		}
	case "--showme:command":
		line(command(l, f, nil)[0])
	case "--showme:incdirs":
		line(f.incdir)
	case "--showme:libdirs":
		line(f.libdir)
	case "--showme:libs":
		line("mpi")
	case "--showme:version":
		line(l.Name + ": gompi's wrapper, MPI 5.0 standard ABI (libmpi_abi.so.1)")
	default:
		return false
	}
	return true
}

// Main runs a wrapper with its arguments and returns its exit status.
func Main(l Lang, args []string) int {
	prefix, err := Prefix()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", l.Name, err)
		return 1
	}
	f := flagsFor(prefix)
	if query(l, f, args, os.Stdout) {
		return 0
	}
	if len(args) == 0 {
		fmt.Fprintf(os.Stderr, "%s: no input files (see --showme)\n", l.Name)
		return 1
	}
	cmdline := command(l, f, args)
	cmd := exec.Command(cmdline[0], cmdline[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return ee.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "%s: %s: %v\n", l.Name, cmdline[0], err)
		return 1
	}
	return 0
}
