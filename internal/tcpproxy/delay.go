package tcpproxy

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

// delayedCopy copies src to dst, each read d after it came, until src
// ends or a write fails: a reader queues what it reads, stamped, and this
// goroutine writes each when it is due, so that reads go on meanwhile.
func delayedCopy(dst, src net.Conn, d time.Duration) {
	queue := make(chan chunk, 1024)
	go func() {
		defer close(queue)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				queue <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(d)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range queue {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.data); err != nil {
			_ = src.Close() // ends the reader, which closes queue
			for range queue {
			}
			return
		}
	}
}
