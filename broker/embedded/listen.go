package embedded

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listen is kfake's listen function when the broker has TLS or SASL users:
// TLS is applied here rather than by kfake, so that the SASL watch below
// sees the Kafka protocol and not encrypted bytes.
func (c config) listen(network, addr string) (net.Listener, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	if c.tls != nil {
		ln = tls.NewListener(ln, c.tls)
	}
	if len(c.users) > 0 {
		ln = &authFailureListener{Listener: ln}
	}
	return ln, nil
}

// authFailureListener makes a failed SASL authentication look as it does on
// Kafka. When kfake rejects credentials it closes the connection without a
// response, so a client sees only a closed connection and cannot tell bad
// credentials from a network failure; Kafka first answers the
// SaslAuthenticate request with SASL_AUTHENTICATION_FAILED. The connections
// of this listener watch the requests until authentication is over and,
// when the broker closes one with a SaslAuthenticate request unanswered,
// write that answer first. A connection dropped because the broker shuts
// down gets no answer: that is not a rejection.
type authFailureListener struct {
	net.Listener
	closed atomic.Bool // kfake closes its listeners first when it shuts down
}

// Accept wraps the next connection.
func (l *authFailureListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &authConn{Conn: conn, shutdown: &l.closed}, nil
}

// Close stops accepting connections.
func (l *authFailureListener) Close() error {
	l.closed.Store(true)
	return l.Listener.Close()
}

// authConn is a broker-side connection that watches the requests read from
// it until the first one that is not part of authentication.
type authConn struct {
	net.Conn
	shutdown *atomic.Bool // the broker is shutting down

	mu            sync.Mutex
	authenticated bool     // a request other than authentication was read: stop watching
	head          [12]byte // size, key, version and correlation ID of the request being read
	headLen       int
	skip          int   // bytes of the current request's body still to pass over
	pending       bool  // a SaslAuthenticate request has no response yet
	version       int16 // of the pending request
	corr          int32 // of the pending request

	closeOnce sync.Once
}

// authFailedWriteTimeout bounds writing the answer to a failed
// authentication, which happens while the broker closes the connection.
const authFailedWriteTimeout = time.Second

// Read reads for the broker and follows the requests.
func (c *authConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.observe(p[:n])
	c.mu.Unlock()
	return n, err
}

// observe follows the request stream; c.mu is held.
func (c *authConn) observe(b []byte) {
	for len(b) > 0 && !c.authenticated {
		if c.skip > 0 {
			n := min(c.skip, len(b))
			c.skip, b = c.skip-n, b[n:]
			continue
		}
		n := copy(c.head[c.headLen:], b)
		c.headLen, b = c.headLen+n, b[n:]
		if c.headLen < len(c.head) {
			return
		}
		c.headLen = 0
		size := int(binary.BigEndian.Uint32(c.head[0:4]))
		c.skip = max(size-8, 0) // the body after key, version and correlation ID
		switch kmsg.Key(binary.BigEndian.Uint16(c.head[4:6])) {
		case kmsg.SASLAuthenticate:
			c.pending = true
			c.version = int16(binary.BigEndian.Uint16(c.head[6:8]))
			c.corr = int32(binary.BigEndian.Uint32(c.head[8:12]))
		case kmsg.ApiVersions, kmsg.SASLHandshake:
		default:
			c.authenticated = true // kfake admits nothing else before authentication
		}
	}
}

// Write writes a response for the broker, which writes each response whole
// in one call, and notes when it answers the pending request.
func (c *authConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.pending && len(p) >= 8 && int32(binary.BigEndian.Uint32(p[4:8])) == c.corr {
		c.pending = false
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// Close answers a pending SaslAuthenticate request as Kafka does before it
// closes the connection.
func (c *authConn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		pending, version, corr := c.pending, c.version, c.corr
		c.pending = false
		c.mu.Unlock()
		if pending && !c.shutdown.Load() {
			_ = c.Conn.SetWriteDeadline(time.Now().Add(authFailedWriteTimeout))
			_, _ = c.Conn.Write(authFailedResponse(version, corr))
		}
	})
	return c.Conn.Close()
}

// authFailedResponse is the frame Kafka sends for rejected credentials.
func authFailedResponse(version int16, corr int32) []byte {
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = version
	resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
	resp.ErrorMessage = kmsg.StringPtr("Authentication failed: Invalid username or password")
	buf := make([]byte, 8, 128) // size and correlation ID, filled in below
	if resp.IsFlexible() {
		buf = append(buf, 0) // no tagged fields in the response header
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf[0:4], uint32(len(buf)-4))
	binary.BigEndian.PutUint32(buf[4:8], uint32(corr))
	return buf
}
