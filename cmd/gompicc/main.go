// Command gompicc compiles and links C programs against gompi's MPI
// (package tools/cc says how; gompicc --showme prints the command).
package main

import (
	"os"

	"gompi/tools/cc"
)

func main() { os.Exit(cc.Main(cc.C, os.Args[1:])) }
