package broker

import (
	"context"
	"net"
	"time"

	"github.com/IBM/sarama"
)

// bindToContext makes the connections of a client built from sc end with
// ctx: sarama's blocking calls take no context, so a client that connects
// to a broker that accepts and never answers would otherwise hold its
// caller for sarama's own timeouts and retries (a minute and more). Once ctx
// ends, every connection the client opened is closed, new ones are
// refused, and metadata retries no longer wait, so whatever the client is
// doing fails at once. A dialer set in Config.Sarama (Net.Proxy) still
// dials.
//
// It costs sarama's periodic socket health check, which only looks at
// plain TCP connections: a broken connection is noticed when next used.
func bindToContext(ctx context.Context, sc *sarama.Config) {
	var inner dialer = &net.Dialer{Timeout: sc.Net.DialTimeout, KeepAlive: sc.Net.KeepAlive, LocalAddr: sc.Net.LocalAddr}
	if sc.Net.Proxy.Enable && sc.Net.Proxy.Dialer != nil {
		inner = sc.Net.Proxy.Dialer
	}
	sc.Net.Proxy.Enable = true
	sc.Net.Proxy.Dialer = ctxDialer{ctx: ctx, inner: inner}

	backoff, fixed := sc.Metadata.Retry.BackoffFunc, sc.Metadata.Retry.Backoff
	sc.Metadata.Retry.BackoffFunc = func(retries, maxRetries int) time.Duration {
		switch {
		case ctx.Err() != nil:
			return 0
		case backoff != nil:
			return backoff(retries, maxRetries)
		}
		return fixed
	}
}

// dialer is what sarama's Net.Proxy.Dialer offers.
type dialer interface {
	Dial(network, addr string) (net.Conn, error)
}

// ctxDialer dials with inner and closes each connection when ctx ends.
type ctxDialer struct {
	ctx   context.Context
	inner dialer
}

func (d ctxDialer) Dial(network, addr string) (net.Conn, error) {
	if err := d.ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var conn net.Conn
	var err error
	if cd, ok := d.inner.(interface {
		DialContext(ctx context.Context, network, addr string) (net.Conn, error)
	}); ok {
		conn, err = cd.DialContext(d.ctx, network, addr)
	} else {
		conn, err = d.inner.Dial(network, addr)
	}
	if err != nil {
		return nil, err
	}
	return &ctxConn{Conn: conn, stop: context.AfterFunc(d.ctx, func() { _ = conn.Close() })}, nil
}

// ctxConn is a connection that ctxDialer closes when its context ends.
type ctxConn struct {
	net.Conn
	stop func() bool
}

func (c *ctxConn) Close() error {
	c.stop()
	return c.Conn.Close()
}
