// Package certs provides the TLS configuration of every listener: a
// certificate from files, or a self-signed one generated once and kept in
// the data directory for local use. TLS 1.2 is the minimum version.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// ACME describes certificates obtained from an ACME CA (RFC 8555).
type ACME struct {
	Email     string
	Directory string   // "" means Let's Encrypt's production directory
	Hosts     []string // the names certificates may be requested for
	CacheDir  string   // where account key and certificates are kept
}

// LoadACME returns a TLS configuration whose certificates come from an
// ACME CA through golang.org/x/crypto/acme/autocert, and the HTTP handler
// that answers HTTP-01 challenges (RFC 8555 §8.3) on the plain HTTP
// listener, passing other requests to fallback. TLS-ALPN-01 (RFC 8737) is
// answered by the TLS configuration itself on the HTTPS listener.
func LoadACME(a ACME, fallback http.Handler) (*tls.Config, http.Handler, error) {
	if len(a.Hosts) == 0 {
		return nil, nil, errors.New("tls: acme needs at least one host name")
	}
	if err := os.MkdirAll(a.CacheDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("tls: acme cache: %w", err)
	}
	m := &autocert.Manager{
		Prompt:     autocert.AcceptTOS,
		Cache:      autocert.DirCache(a.CacheDir),
		HostPolicy: autocert.HostWhitelist(a.Hosts...),
		Email:      a.Email,
	}
	if a.Directory != "" {
		m.Client = &acme.Client{DirectoryURL: a.Directory}
	}
	conf := m.TLSConfig()
	conf.MinVersion = tls.VersionTLS12
	return conf, m.HTTPHandler(fallback), nil
}

// Load returns a server TLS configuration. With certFile and keyFile it loads
// them; otherwise, when selfSigned is set, it uses DIR/tls/self-signed.{crt,key},
// creating them for hostname on first use. It returns nil, nil when TLS is
// not configured at all.
func Load(certFile, keyFile string, selfSigned bool, hostname, dataDir string) (*tls.Config, error) {
	if certFile == "" && selfSigned {
		dir := filepath.Join(dataDir, "tls")
		certFile = filepath.Join(dir, "self-signed.crt")
		keyFile = filepath.Join(dir, "self-signed.key")
		if _, err := os.Stat(certFile); errors.Is(err, os.ErrNotExist) {
			if err := writeSelfSigned(dir, certFile, keyFile, hostname); err != nil {
				return nil, err
			}
		}
	}
	if certFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load %s: %w", certFile, err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12, // Go's default suites for 1.2 are AEAD with forward secrecy
	}, nil
}

func writeSelfSigned(dir, certFile, keyFile, hostname string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("tls: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return fmt.Errorf("tls: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: hostname, Organization: []string{"pimail self-signed"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(5, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{hostname},
	}
	if hostname != "localhost" {
		tmpl.DNSNames = append(tmpl.DNSNames, "localhost")
	}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("tls: create certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("tls: marshal key: %w", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	return nil
}
