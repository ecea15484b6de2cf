/*
Copyright The book-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package metrics

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A self-signed certificate is served with TLS 1.2 or later and HTTP/1.1
// only.
func TestServingTLSSelfSigned(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := ServingTLS(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()

	for _, c := range []struct {
		name   string
		client *tls.Config
		ok     bool
	}{
		{"TLS 1.2, h2 or http/1.1", &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}, true},
		{"TLS 1.1", &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := tls.Dial("tcp", ln.Addr().String(), c.client)
			if !c.ok {
				if err == nil {
					conn.Close()
					t.Fatal("handshake succeeded, want it refused")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			st := conn.ConnectionState()
			if st.NegotiatedProtocol != "http/1.1" {
				t.Errorf("negotiated %q, want http/1.1 (no HTTP/2)", st.NegotiatedProtocol)
			}
			leaf := st.PeerCertificates[0]
			if !strings.HasPrefix(leaf.Subject.CommonName, "localhost") || len(leaf.IPAddresses) == 0 || !leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
				t.Errorf("certificate for %q %v, want localhost and 127.0.0.1", leaf.Subject.CommonName, leaf.IPAddresses)
			}
		})
	}
}

// A --metrics-cert-dir without a usable pair is one line naming the flag and
// what to put there.
func TestServingTLSBadCertDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, CertFile), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(dir, "missing"), dir} {
		_, err := ServingTLS(context.Background(), d)
		if err == nil {
			t.Fatalf("ServingTLS(%q) succeeded", d)
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, "--metrics-cert-dir") || !strings.Contains(msg, "tls.crt and tls.key") {
			t.Errorf("ServingTLS(%q) = %q, want one line naming --metrics-cert-dir and the files", d, msg)
		}
	}
}
