package pgtest

import (
	"net"
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
// then, so that reads go on meanwhile.
func delayedCopy(dst, src net.Conn, delay func() time.Duration) {
	queue := make(chan chunk, 1024)
	go readChunks(src, delay, queue)
	next, ok := <-queue
	for ok {
		time.Sleep(time.Until(next.due))
		out := net.Buffers{next.data}
		var more bool
		next, more, ok = takeDue(queue, &out)
		if _, err := out.WriteTo(dst); err != nil {
			_ = src.Close() // ends the reader, which closes queue
			for range queue {
			}
			return
		}
		if ok && !more {
			next, ok = <-queue
		}
	}
}

// readChunks reads src into queue, each chunk due delay() after it came,
// and closes queue when src ends.
func readChunks(src net.Conn, delay func() time.Duration, queue chan<- chunk) {
	defer close(queue)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			queue <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(delay())}
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
