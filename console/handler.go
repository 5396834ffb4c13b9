package console

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/koto-dev/watermill-koto/internal/offsets"
)

// Handler is the console, an http.Handler. Build it with [NewHandler]; it
// samples the overview's figures in a goroutine of its own until Close.
type Handler struct {
	cfg     Config
	serve   http.Handler
	offsets *offsets.Reader
	queues  *queues
	newest  *newest
	history history
	jobs    jobs
	pages   pages
	metrics *metrics // nil unless Config.Metrics
	key     []byte   // signs sessions and CSRF tokens; new with each Handler

	ctx       context.Context // ends with Close; replays run in it
	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// NewHandler connects to Kafka with cfg.Broker and returns the console.
// An invalid cfg fails with an error that wraps koto.ErrInvalidConfig. Mount
// it where it suits, under a prefix with http.StripPrefix, and Close it
// when done.
func NewHandler(cfg Config) (*Handler, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	r, err := newOffsetReader(cfg.Broker)
	if err != nil {
		return nil, err
	}
	qs := &queues{cfg: cfg}
	h := &Handler{cfg: cfg, offsets: r, queues: qs, newest: &newest{queues: qs}, pages: p, key: []byte(rand.Text() + rand.Text())}
	if cfg.Metrics {
		h.metrics = newMetrics(h)
	}
	h.serve = h.guard(h.mux())
	h.ctx, h.stop = context.WithCancel(context.Background())
	h.wg.Go(h.sample)
	return h, nil
}

// ServeHTTP serves the console's pages.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.serve.ServeHTTP(w, r)
}

// Close stops sampling, cancels the replays that run (each records what
// it sent first; see the deadletter package) and disconnects. Calling it
// twice is fine.
func (h *Handler) Close() error {
	h.closeOnce.Do(func() {
		h.stop()
		h.wg.Wait()
		h.closeErr = errors.Join(h.queues.Close(), h.offsets.Close())
	})
	return h.closeErr
}

// sample records a snapshot at once and then every SampleInterval.
func (h *Handler) sample() {
	t := time.NewTicker(h.cfg.SampleInterval)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(h.ctx, max(h.cfg.SampleInterval, 30*time.Second))
		s := h.take(ctx)
		cancel()
		if h.ctx.Err() != nil {
			return
		}
		for _, e := range s.Errors {
			h.cfg.Logger.Warn("console: sampling", "error", e)
		}
		h.history.add(s)
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
	}
}
