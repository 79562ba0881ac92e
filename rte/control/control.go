// Package control is the authenticated control plane of a gompi job: the
// per-job secret, the gRPC options that demand it on every call, the
// pinned TLS that protects calls crossing machines, the addresses
// (contacts) processes dial, and the handshake line that hands a daemon
// its secret on standard input. The messages and services themselves are
// in package controlpb (control.proto).
//
// Why gRPC: the control plane is a handful of typed calls plus one
// long-lived bidirectional stream per daemon, between processes gompi
// builds itself. gRPC gives both over Unix sockets and TCP with
// flow control, deadlines, cancellation, metadata for authentication and
// TLS, and a schema that later issues extend by adding fields and calls
// (checkpoint, restart, migrate) without breaking running tools. It is
// already a dependency (go-plugin carries it), so it costs no new module.
package control

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// SecretLen is the length of a job secret in bytes.
const SecretLen = 32

// MetadataKey is the gRPC metadata entry carrying the secret (hex).
const MetadataKey = "gompi-job-secret"

// ErrBadSecret is wrapped by errors about a malformed secret.
var ErrBadSecret = errors.New("control: bad job secret")

// Secret is a job's shared secret. Its String is redacted, so it cannot
// leak into a log by accident; Hex gives the text form on purpose.
type Secret struct{ b [SecretLen]byte }

// NewSecret returns a random secret.
func NewSecret() (Secret, error) {
	var s Secret
	if _, err := rand.Read(s.b[:]); err != nil {
		return s, fmt.Errorf("control: new secret: %w", err)
	}
	return s, nil
}

// ParseSecret reads the hex form of a secret.
func ParseSecret(h string) (Secret, error) {
	var s Secret
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != SecretLen {
		return s, fmt.Errorf("%w: want %d hex digits", ErrBadSecret, 2*SecretLen)
	}
	copy(s.b[:], b)
	return s, nil
}

// SecretFromBytes takes a secret as the bytes of a message field (the
// data-plane secret of a launch, pb.Launch.DataSecret).
func SecretFromBytes(b []byte) (Secret, error) {
	var s Secret
	if len(b) != SecretLen {
		return s, fmt.Errorf("%w: %d bytes, want %d", ErrBadSecret, len(b), SecretLen)
	}
	copy(s.b[:], b)
	return s, nil
}

// RankSecrets are what a rank is handed on its secret pipe: the job's
// control secret, which it proves to its gompid, and the data-plane
// secret of its launch generation, which ranks prove to each other (the
// BTL hello). They differ so that a recovery inside one run can give the
// relaunched ranks a new data-plane secret while the job's daemons and
// tools keep the control secret they hold.
type RankSecrets struct{ Control, Data Secret }

// RankSecretsLen is the length of RankSecrets' text form.
const RankSecretsLen = 4*SecretLen + 1

// Text is the form written to the pipe: both secrets in hex, control
// first, on two lines.
func (r RankSecrets) Text() string { return r.Control.Hex() + "\n" + r.Data.Hex() }

// ParseRankSecrets reads RankSecrets' text form.
func ParseRankSecrets(text string) (RankSecrets, error) {
	ctl, data, ok := strings.Cut(text, "\n")
	if !ok {
		return RankSecrets{}, fmt.Errorf("%w: want the control and data-plane secrets on two lines", ErrBadSecret)
	}
	var r RankSecrets
	var err error
	if r.Control, err = ParseSecret(ctl); err != nil {
		return RankSecrets{}, fmt.Errorf("control secret: %w", err)
	}
	if r.Data, err = ParseSecret(data); err != nil {
		return RankSecrets{}, fmt.Errorf("data-plane secret: %w", err)
	}
	return r, nil
}

// Hex is the text form of the secret.
func (s Secret) Hex() string { return hex.EncodeToString(s.b[:]) }

// Bytes is a copy of the secret itself, for what derives keys from it
// (the ranks' data-plane hello, package mpi).
func (s Secret) Bytes() []byte { return append([]byte(nil), s.b[:]...) }

// String is redacted.
func (s Secret) String() string { return "<job secret>" }

// IsZero reports whether s was never set.
func (s Secret) IsZero() bool { return s == Secret{} }

// matches compares in constant time.
func (s Secret) matches(h string) bool {
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != SecretLen {
		return false
	}
	return subtle.ConstantTimeCompare(s.b[:], b) == 1
}

// ServerOptions make a gRPC server refuse every call that does not carry
// secret, with codes.Unauthenticated and without running its handler.
func ServerOptions(secret Secret) []grpc.ServerOption {
	check := func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		for _, v := range md.Get(MetadataKey) {
			if secret.matches(v) {
				return nil
			}
		}
		return status.Error(codes.Unauthenticated, "control: missing or wrong job secret")
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := check(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := check(ss.Context()); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// secretCreds adds the secret to every call.
type secretCreds struct{ hex string }

func (c secretCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{MetadataKey: c.hex}, nil
}

// RequireTransportSecurity is false: over Unix sockets the kernel's file
// permissions protect the secret; over TCP Dial always uses TLS anyway.
func (secretCreds) RequireTransportSecurity() bool { return false }

// IsUnauthenticated reports whether err is a server's refusal of the secret.
func IsUnauthenticated(err error) bool { return status.Code(err) == codes.Unauthenticated }
