package pgtest

import (
	"net"
	"sync/atomic"
	"time"
)

// chunk is what one read of a delayed connection got, and when it may be
// written on.
type chunk struct {
	data []byte
	due  time.Time
}

// delayedCopy copies src to dst, each read delay() after it came, until
// src ends or a write fails: a reader queues what it reads, stamped, and
// this goroutine writes each when it is due, together with those due by
// then, so that reads go on meanwhile. While there is no delay and
// nothing queued, the reader writes itself, as a plain copy would.
func delayedCopy(dst, src net.Conn, delay func() time.Duration) {
	queue := make(chan chunk, 1024)
	var queued atomic.Int64 // chunks queued and not yet written
	go readChunks(dst, src, delay, queue, &queued)
	next, ok := <-queue
	for ok {
		time.Sleep(time.Until(next.due))
		out := net.Buffers{next.data}
		var more bool
		next, more, ok = takeDue(queue, &out)
		n := int64(len(out))
		if _, err := out.WriteTo(dst); err != nil {
			_ = src.Close() // ends the reader, which closes queue
			for range queue {
			}
			return
		}
		queued.Add(-n)
		if ok && !more {
			next, ok = <-queue
		}
	}
}

// readChunks reads src until it ends or a write fails, then closes
// queue. What it reads goes into queue, due delay() after it came; or,
// with no delay and nothing queued, straight to dst.
func readChunks(dst, src net.Conn, delay func() time.Duration, queue chan<- chunk, queued *atomic.Int64) {
	defer close(queue)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := delay(); d == 0 && queued.Load() == 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			} else {
				queued.Add(1)
				queue <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(d)}
			}
		}
		if err != nil {
			return
		}
	}
}

// takeDue adds to out the chunks already queued that are due now, without
// waiting. It returns the first queued chunk that is not due yet (more),
// and ok false once queue is closed.
func takeDue(queue <-chan chunk, out *net.Buffers) (next chunk, more, ok bool) {
	now := time.Now()
	for {
		select {
		case c, open := <-queue:
			if !open {
				return chunk{}, false, false
			}
			if c.due.After(now) {
				return c, true, true
			}
			*out = append(*out, c.data)
		default:
			return chunk{}, false, true
		}
	}
}
