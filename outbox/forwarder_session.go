package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/internal/pgschema"
	"github.com/koto-dev/watermill-koto/internal/retry"
)

// session is one life of the forwarder on one connection: it waits for
// the table's lock, then forwards until an error. Closing the connection
// releases the lock. progressed reports whether it forwarded a batch.
func (f *Forwarder) session(ctx context.Context) (progressed bool, err error) {
	conn, err := f.connect(ctx)
	if err != nil {
		return false, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer f.disconnect(conn)
	if err := f.acquire(ctx, conn); err != nil {
		return false, err
	}
	f.active.Store(true)
	defer f.active.Store(false)
	f.log.Info("outbox forwarder active")
	pos, err := f.prepare(ctx, conn)
	if err != nil {
		return false, err
	}
	return f.loop(ctx, conn, pos)
}

func (f *Forwarder) connect(ctx context.Context) (*pgx.Conn, error) {
	cc := f.o.pool.Config().ConnConfig.Copy()
	cc.RuntimeParams["application_name"] = f.cfg.ApplicationName
	// Its commits record positions and deleted rows: one lost in a crash
	// of PostgreSQL only makes the batch go out again, so they need not
	// wait for the WAL flush.
	cc.RuntimeParams["synchronous_commit"] = "off"
	qctx, cancel := context.WithTimeout(ctx, f.cfg.QueryTimeout)
	defer cancel()
	return pgx.ConnectConfig(qctx, cc)
}

func (f *Forwarder) disconnect(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// acquire waits until this connection holds the table's forwarder lock,
// trying every TakeoverInterval. It polls rather than blocks in
// pg_advisory_lock, whose waiting statement would hold back VACUUM's
// horizon for as long as it waits.
func (f *Forwarder) acquire(ctx context.Context, conn *pgx.Conn) error {
	for standby := false; ; standby = true {
		var locked bool
		err := f.query(ctx, func(ctx context.Context) error {
			return conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1::int4, $2::int4)",
				pgschema.ClassForwarder, pgschema.LockObject(f.o.t.outbox)).Scan(&locked)
		})
		if err != nil || locked {
			return err
		}
		if !standby {
			f.log.Debug("outbox forwarder standing by: another one is active")
		}
		if err := retry.Sleep(ctx, f.cfg.TakeoverInterval); err != nil {
			return err
		}
	}
}

// prepare readies an active session: the tables, the notifications, the
// group's position, and the Kafka producer.
func (f *Forwarder) prepare(ctx context.Context, conn *pgx.Conn) (position, error) {
	var pos position
	err := f.query(ctx, func(ctx context.Context) error {
		if err := f.o.setup(ctx, conn); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, f.o.t.listenSQL()); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		for _, q := range f.sql.initOffsets {
			if _, err := conn.Exec(ctx, q.Query, q.Args...); err != nil {
				return fmt.Errorf("initialise the position: %w", err)
			}
		}
		return conn.QueryRow(ctx, f.sql.position, forwarderGroup).Scan(&pos.xid, &pos.offset)
	})
	if err != nil || f.producer != nil {
		return pos, err
	}
	if f.producer, err = broker.NewProducer(f.cfg.Broker); err != nil {
		return pos, fmt.Errorf("connect to Kafka: %w", err)
	}
	return pos, nil
}

// loop forwards batch after batch. While Kafka takes a batch, it reads
// the next one; once Kafka has acknowledged every record of the batch, it
// records it. Between batches it does not wait when there are rows; it
// waits a few milliseconds, growing up to about a second, while committed
// rows wait behind an older transaction; else until a notification or the
// poll interval.
func (f *Forwarder) loop(ctx context.Context, conn *pgx.Conn, pos position) (progressed bool, err error) {
	behind := 0 // waits so far for rows behind an older transaction
	var s schedule
	if err := f.readNext(ctx, conn, &s); err != nil {
		return false, err
	}
	next, err := f.read(ctx, conn, pos)
	for err == nil {
		if next.rows > 0 {
			cur := next
			sent := f.send(cur)
			if err = f.tend(ctx, conn, &s); err == nil {
				next, err = f.read(ctx, conn, cur.end)
			}
			if serr := <-sent; serr != nil {
				f.closeProducer() // a new one starts clean after whatever went wrong
				return progressed, serr
			}
			if aerr := f.ack(ctx, conn, cur); aerr != nil {
				return progressed, aerr
			}
			progressed = true
			continue
		}
		wait := f.cfg.PollInterval
		if next.held() {
			wait = heldWait(behind, f.cfg.PollInterval)
			behind++
		} else {
			behind = 0
		}
		var woke bool
		if woke, err = f.wait(ctx, conn, s.until(time.Now(), wait), &s); err != nil {
			break
		}
		if woke {
			behind = 0
		}
		if err = f.tend(ctx, conn, &s); err == nil {
			next, err = f.read(ctx, conn, next.end)
		}
	}
	return progressed, err
}

// wait waits up to d for a notification on conn and then takes every
// notification already received; woke reports whether there was one. The
// due times that notifications announce go into s.
func (f *Forwarder) wait(ctx context.Context, conn *pgx.Conn, d time.Duration, s *schedule) (woke bool, err error) {
	if d > 0 {
		wctx, cancel := context.WithTimeout(ctx, d)
		n, err := conn.WaitForNotification(wctx)
		timedOut := wctx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return false, ctx.Err()
		case err != nil && (!timedOut || conn.IsClosed()):
			return false, fmt.Errorf("wait for notifications: %w", err)
		}
		if n != nil {
			woke = true
			s.notified(dueOf(n.Payload))
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel() // only what is buffered already
	for {
		n, _ := conn.WaitForNotification(done)
		if n == nil {
			return woke, nil
		}
		woke = true
		s.notified(dueOf(n.Payload))
	}
}

// query runs fn with a context bounded by QueryTimeout.
func (f *Forwarder) query(ctx context.Context, fn func(context.Context) error) error {
	qctx, cancel := context.WithTimeout(ctx, f.cfg.QueryTimeout)
	defer cancel()
	return fn(qctx)
}

// heldWait is how long the forwarder waits, after behind waits already,
// for rows held behind an older transaction: a few milliseconds, doubling
// up to about a second, not more, since the older transaction may be
// anyone's in the cluster and end any moment; and never past poll.
func heldWait(behind int, poll time.Duration) time.Duration {
	return min(time.Millisecond<<min(behind, 10), poll)
}
