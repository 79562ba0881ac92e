package control

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// NewCertificate makes a self-signed certificate for one job's HNP. Daemons
// do not check it against any authority: they pin its SHA-256, which they
// received with the secret in their handshake. That keeps the secret and
// the job's traffic private on a network without a PKI.
func NewCertificate() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("control: certificate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("control: certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "gompirun"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0), // a job may run for a long time; the pin, not the date, is checked
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("control: certificate: %w", err)
	}
	sum := sha256.Sum256(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, sum[:], nil
}

// ServerTLS is the HNP's TLS configuration for its TCP listener.
func ServerTLS(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
}

// errPin is returned when the server's certificate is not the pinned one.
var errPin = errors.New("control: the server's certificate is not the job's (wrong or stale HNP address?)")

// PinnedTLS is a daemon's TLS configuration: it accepts exactly the
// certificate whose SHA-256 is pin.
func PinnedTLS(pin []byte) *tls.Config {
	want := append([]byte(nil), pin...)
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The chain is not verified against an authority; the pin below is
		// the whole check.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errPin
			}
			sum := sha256.Sum256(raw[0])
			if len(want) != len(sum) || subtle.ConstantTimeCompare(sum[:], want) != 1 {
				return errPin
			}
			return nil
		},
	}
}
