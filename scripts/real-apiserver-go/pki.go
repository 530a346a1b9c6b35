package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// The Services' cluster IPs; its first address is the "kubernetes" Service's, which the
// serving certificate names too.
const serviceCIDR = "10.0.0.0/24"

// pki holds the paths of the generated files, and the PEM blocks the kubeconfig embeds.
type pki struct {
	caCert, servingCert, servingKey, saPrivateKey, saPublicKey string
	caPEM, adminCertPEM, adminKeyPEM                           []byte
}

// writePKI generates a CA, a serving certificate for 127.0.0.1/localhost, an admin client
// certificate (group system:masters: all permissions, whatever RBAC says), and the key pair
// with which ServiceAccount tokens are signed. ECDSA P-256: fast to generate.
func writePKI(dir string) (*pki, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{}
	write := func(name string, data []byte) (string, error) {
		path := filepath.Join(dir, name)
		return path, os.WriteFile(path, data, 0o600)
	}

	caKey, caPEM, ca, err := newCert(nil, nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "real-apiserver-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	if err != nil {
		return nil, err
	}
	p.caPEM = caPEM
	if p.caCert, err = write("ca.crt", caPEM); err != nil {
		return nil, err
	}

	servingKey, servingPEM, _, err := newCert(ca, caKey, &x509.Certificate{
		Subject: pkix.Name{CommonName: "kube-apiserver"},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, err
	}
	if p.servingCert, err = write("serving.crt", servingPEM); err != nil {
		return nil, err
	}
	if p.servingKey, err = write("serving.key", keyPEM(servingKey)); err != nil {
		return nil, err
	}

	adminKey, adminPEM, _, err := newCert(ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	p.adminCertPEM, p.adminKeyPEM = adminPEM, keyPEM(adminKey)

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if p.saPrivateKey, err = write("sa.key", keyPEM(saKey)); err != nil {
		return nil, err
	}
	if p.saPublicKey, err = write("sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})); err != nil {
		return nil, err
	}
	return p, nil
}

// newCert makes a key and a certificate from template, signed by parent (self-signed if nil).
func newCert(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, template *x509.Certificate) (*ecdsa.PrivateKey, []byte, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, nil, err
	}
	template.SerialNumber = serial
	template.NotBefore = time.Now().Add(-time.Hour) // tolerate a little clock skew
	template.NotAfter = time.Now().Add(10 * 365 * 24 * time.Hour)
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert, nil
}

func keyPEM(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		panic(err) // only for curves Go does not know
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// httpClient authenticates as the admin and trusts only our CA.
func (p *pki) httpClient() (*http.Client, error) {
	cert, err := tls.X509KeyPair(p.adminCertPEM, p.adminKeyPEM)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.caPEM)
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}},
		},
	}, nil
}

// writeKubeconfig writes a self-contained kubeconfig (everything embedded, mode 0600)
// atomically: a reader never sees half a file.
func writeKubeconfig(path, server string, p *pki) error {
	b64 := base64.StdEncoding.EncodeToString
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: real-apiserver
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: real-apiserver
  context:
    cluster: real-apiserver
    user: admin
current-context: real-apiserver
`, server, b64(p.caPEM), b64(p.adminCertPEM), b64(p.adminKeyPEM))

	tmp, err := os.CreateTemp(filepath.Dir(path), ".kubeconfig-*") // created with mode 0600
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
