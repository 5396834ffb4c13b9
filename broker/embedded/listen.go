package embedded

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listen is kfake's listen function when the broker has TLS or SASL users:
// TLS is applied here rather than by kfake, so that the SASL connections
// below see the Kafka protocol and not encrypted bytes.
func (c config) listen(network, addr string) (net.Listener, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	if c.tls != nil {
		ln = tls.NewListener(ln, c.tls)
	}
	if len(c.users) > 0 {
		ln = &saslListener{Listener: ln, mechanisms: c.mechanisms()}
	}
	return ln, nil
}

// mechanisms returns the SASL mechanisms of the broker's users, each once.
func (c config) mechanisms() []string {
	var ms []string
	for _, u := range c.users {
		if !slices.Contains(ms, u.mechanism) {
			ms = append(ms, u.mechanism)
		}
	}
	return ms
}

// saslListener makes SASL on kfake look as it does on Kafka to every
// client, librdkafka included. Its connections follow the request stream
// and correct kfake in three places:
//
//   - ApiVersions: kfake advertises SaslHandshake 1..1, and librdkafka
//     enables SASL only if version 0 is in the range (it then sends v1).
//     Responses are rewritten to advertise 0..1.
//   - SaslHandshake v0, which kfake does not implement: kfake closes the
//     connection without a response; the client first gets one with
//     UNSUPPORTED_VERSION and the broker's mechanisms.
//   - Rejected credentials: kfake closes the connection without a
//     response, so a client cannot tell bad credentials from a network
//     failure; Kafka first answers the SaslAuthenticate request with
//     SASL_AUTHENTICATION_FAILED, and so does this listener.
//
// A connection dropped because the broker shuts down gets no answer: that
// is not a rejection.
type saslListener struct {
	net.Listener
	mechanisms []string
	closed     atomic.Bool // kfake closes its listeners first when it shuts down
}

// Accept wraps the next connection.
func (l *saslListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &saslConn{Conn: conn, shutdown: &l.closed, mechanisms: l.mechanisms}, nil
}

// Close stops accepting connections.
func (l *saslListener) Close() error {
	l.closed.Store(true)
	return l.Listener.Close()
}

// request identifies a request read from a connection.
type request struct {
	key     kmsg.Key
	version int16
	corr    int32
}

// saslConn is a broker-side connection that follows the requests read from
// it; see [saslListener].
type saslConn struct {
	net.Conn
	shutdown   *atomic.Bool // the broker is shutting down
	mechanisms []string

	mu          sync.Mutex
	head        [12]byte // size, key, version and correlation ID of the request being read
	headLen     int
	skip        int       // bytes of the current request's body still to pass over
	refusal     *request  // an authentication request kfake may close on unanswered
	apiVersions []request // ApiVersions requests not answered yet

	closeOnce sync.Once
}

// refusalWriteTimeout bounds writing the answer to a refused request, which
// happens while the broker closes the connection.
const refusalWriteTimeout = time.Second

// Read reads for the broker and follows the requests.
func (c *saslConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.observe(p[:n])
	c.mu.Unlock()
	return n, err
}

// observe follows the request stream; c.mu is held.
func (c *saslConn) observe(b []byte) {
	for len(b) > 0 {
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
		req := request{
			key:     kmsg.Key(binary.BigEndian.Uint16(c.head[4:6])),
			version: int16(binary.BigEndian.Uint16(c.head[6:8])),
			corr:    int32(binary.BigEndian.Uint32(c.head[8:12])),
		}
		switch {
		case req.key == kmsg.ApiVersions:
			c.apiVersions = append(c.apiVersions, req)
		case req.key == kmsg.SASLAuthenticate, req.key == kmsg.SASLHandshake && req.version == 0:
			c.refusal = &req
		}
	}
}

// Write writes a response for the broker, which writes each response whole
// in one call, and notes which request it answers.
func (c *saslConn) Write(p []byte) (int, error) {
	out := p
	if len(p) >= 8 {
		corr := int32(binary.BigEndian.Uint32(p[4:8]))
		c.mu.Lock()
		if c.refusal != nil && c.refusal.corr == corr {
			c.refusal = nil
		}
		if i := slices.IndexFunc(c.apiVersions, func(r request) bool { return r.corr == corr }); i >= 0 {
			out = advertiseHandshakeV0(p, c.apiVersions[i].version)
			c.apiVersions = slices.Delete(c.apiVersions, i, i+1)
		}
		c.mu.Unlock()
	}
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close answers a request kfake refused without an answer, as Kafka would,
// before it closes the connection.
func (c *saslConn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		refused := c.refusal
		c.refusal = nil
		c.mu.Unlock()
		if refused != nil && !c.shutdown.Load() {
			_ = c.Conn.SetWriteDeadline(time.Now().Add(refusalWriteTimeout))
			_, _ = c.Conn.Write(c.refusalResponse(*refused))
		}
	})
	return c.Conn.Close()
}

// refusalResponse is the frame that answers the refused request req.
func (c *saslConn) refusalResponse(req request) []byte {
	if req.key == kmsg.SASLHandshake {
		resp := kmsg.NewPtrSASLHandshakeResponse()
		resp.Version = req.version
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.SupportedMechanisms = c.mechanisms
		return frame(resp, req.corr)
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = req.version
	resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
	resp.ErrorMessage = kmsg.StringPtr("Authentication failed: Invalid username or password")
	return frame(resp, req.corr)
}

// advertiseHandshakeV0 returns the ApiVersions response frame p, answering
// a request of the given version, with SaslHandshake's minimum version
// lowered to 0. A frame it cannot decode or that carries an error is
// returned as it is.
func advertiseHandshakeV0(p []byte, version int16) []byte {
	body := p[8:]
	if len(body) < 2 || binary.BigEndian.Uint16(body[0:2]) != 0 {
		return p // an error answer, possibly at another version than asked
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	if err := resp.ReadFrom(body); err != nil {
		return p
	}
	i := slices.IndexFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
		return k.ApiKey == int16(kmsg.SASLHandshake)
	})
	if i < 0 || resp.ApiKeys[i].MinVersion == 0 {
		return p
	}
	resp.ApiKeys[i].MinVersion = 0
	return frame(resp, int32(binary.BigEndian.Uint32(p[4:8])))
}

// frame encodes resp as the response to the request with correlation ID
// corr.
func frame(resp kmsg.Response, corr int32) []byte {
	buf := make([]byte, 8, 256) // size and correlation ID, filled in below
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		buf = append(buf, 0) // no tagged fields in the response header
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf[0:4], uint32(len(buf)-4))
	binary.BigEndian.PutUint32(buf[4:8], uint32(corr))
	return buf
}
