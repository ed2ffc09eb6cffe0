// spdyattach is a SPDY attach client of the live suite, written in Go on spdystream the way
// client-go's SPDY round tripper builds one: a TLS dial, an HTTP/1.1 upgrade to SPDY/3.1, a
// spdystream connection, then the error, stdin, stdout and resize streams, each waited on for its
// reply. It declares its stdin stream with the header values {"Streamtype": ["stdin", ""]},
// which spdystream writes NUL-joined ("stdin\x00") and the kubelet reads as "stdin" (the first
// value): a stream type that a relay comparing the header value as a whole would not recognise.
//
// It copies its own stdin, line by line, to the stdin stream and the stdout stream to its stdout.
// After each line it sends a SPDY PING and, once it is answered (everything sent before it has
// been read on the other side), prints "spdyattach: judged N" on stderr. When the session ends
// it prints what the error stream said on stderr.
//
// --streams names the streams it opens, in order (default "error,stdin+,stdout,resize"; "stdin+"
// is stdin declared as {"Streamtype": ["stdin", ""]}, "stdin" as {"Streamtype": ["stdin"]}): a
// client may open streams its attach query never asked for, and the kubelet attaches them all.
// A stream the server does not accept ends the run: it prints "spdyattach: stream S not
// accepted", then what the error stream said, and exits 2.
//
// Build (Debian: golang-go, golang-github-docker-spdystream-dev), in GOPATH mode:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o spdyattach ./tests/go/spdyattach
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/docker/spdystream"
)

// bufferedConn is the upgraded connection with what the HTTP reader already buffered in front.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "spdyattach: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	target := flag.String("url", "", "https URL of the attach path, with its query")
	caFile := flag.String("ca", "", "CA bundle of the server's certificate")
	certFile := flag.String("cert", "", "client certificate (the front-proxy client's)")
	keyFile := flag.String("key", "", "client key")
	user := flag.String("user", "", "X-Remote-User")
	streams := flag.String("streams", "error,stdin+,stdout,resize", "streams to open, in order")
	flag.Parse()

	u, err := url.Parse(*target)
	if err != nil {
		fail("url: %v", err)
	}
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(*caFile)
	if err != nil || !pool.AppendCertsFromPEM(ca) {
		fail("ca: %v", err)
	}
	pair, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		fail("client certificate: %v", err)
	}
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{
		RootCAs:      pool,
		Certificates: []tls.Certificate{pair},
		NextProtos:   []string{"http/1.1"},
		ServerName:   u.Hostname(),
	})
	if err != nil {
		fail("dial: %v", err)
	}
	req, err := http.NewRequest(http.MethodPost, u.String(), nil)
	if err != nil {
		fail("request: %v", err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	req.Header.Add("X-Stream-Protocol-Version", "v4.channel.k8s.io")
	req.Header.Set("X-Remote-User", *user)
	req.Header.Set("X-Remote-Group", "system:authenticated")
	fmt.Fprintln(os.Stderr, "spdyattach: connected")
	if err := req.Write(conn); err != nil {
		fail("upgrade request: %v", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		fail("upgrade response: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(resp.Body)
		fail("upgrade refused: %s %s", resp.Status, body)
	}
	fmt.Fprintln(os.Stderr, "spdyattach: upgraded")
	sc, err := spdystream.NewConnection(&bufferedConn{Conn: conn, r: br}, false)
	if err != nil {
		fail("spdy: %v", err)
	}
	go sc.Serve(spdystream.NoOpStreamHandler)
	var errStream, stdin, stdout *spdystream.Stream
	// Each stream is waited on for its reply before the next is opened, as apimachinery's SPDY
	// connection does.
	for _, name := range strings.Split(*streams, ",") {
		values := []string{name}
		if name == "stdin+" {
			values = []string{"stdin", ""}
		}
		h := http.Header{}
		h["Streamtype"] = values
		s, err := sc.CreateStream(h, nil, false)
		if err == nil {
			err = s.Wait()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "spdyattach: stream %s not accepted: %v\n", name, err)
			if errStream != nil {
				msg, _ := io.ReadAll(errStream)
				fmt.Fprintf(os.Stderr, "spdyattach: error stream: %s\n", msg)
			}
			os.Exit(2)
		}
		switch values[0] {
		case "error":
			errStream = s
		case "stdin":
			stdin = s
		case "stdout":
			stdout = s
		}
	}
	fmt.Fprintln(os.Stderr, "spdyattach: streams open")
	if stdout != nil {
		go func() {
			_, _ = io.Copy(os.Stdout, stdout)
		}()
	}
	go func() {
		lines := bufio.NewReader(os.Stdin)
		for n := 1; ; n++ {
			line, err := lines.ReadBytes('\n')
			if len(line) > 0 && stdin != nil {
				if _, werr := stdin.Write(line); werr != nil {
					break
				}
				if _, perr := sc.Ping(); perr == nil {
					fmt.Fprintf(os.Stderr, "spdyattach: judged %d\n", n)
				}
			}
			if err != nil {
				break
			}
		}
		if stdin != nil {
			_ = stdin.Close()
		}
	}()
	if errStream == nil {
		fail("no error stream was opened")
	}
	msg, _ := io.ReadAll(errStream)
	fmt.Fprintf(os.Stderr, "spdyattach: error stream: %s\n", msg)
}
