// Package controlpb is the generated code of the gompi control plane
// (control.proto). The generated files are committed; regenerate them
// after changing the .proto with `go generate ./rte/control/proto`, which
// needs protoc (apt-get install -y protobuf-compiler) and the Go plugins
// (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
// google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2).
package controlpb

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative control.proto
