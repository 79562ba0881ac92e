// Command gompicxx compiles and links C++ programs against gompi's MPI
// (package tools/cc says how; gompicxx --showme prints the command).
package main

import (
	"os"

	"gompi/tools/cc"
)

func main() { os.Exit(cc.Main(cc.CXX, os.Args[1:])) }
