package certs

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

func TestSelfSignedIsCreatedOnceAndServes(t *testing.T) {
	dir := t.TempDir()
	c1, err := Load("", "", true, "mail.test", dir)
	if err != nil || c1 == nil {
		t.Fatalf("Load: %v %v", c1, err)
	}
	c2, err := Load("", "", true, "mail.test", dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(c1.Certificates[0].Certificate[0]) != string(c2.Certificates[0].Certificate[0]) {
		t.Error("second Load generated a new certificate instead of reusing the kept one")
	}
	leaf, err := x509.ParseCertificate(c1.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.VerifyHostname("mail.test"); err != nil {
		t.Error(err)
	}
	if c1.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion = %x", c1.MinVersion)
	}
}

func TestNoTLSConfigured(t *testing.T) {
	c, err := Load("", "", false, "h", t.TempDir())
	if c != nil || err != nil {
		t.Fatalf("want nil, nil; got %v, %v", c, err)
	}
	if _, err := Load("/nonexistent.crt", "/nonexistent.key", false, "h", t.TempDir()); err == nil {
		t.Fatal("missing files: want error")
	}
}
