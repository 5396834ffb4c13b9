package wmlog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
)

func TestPlumbing(t *testing.T) {
	var buf bytes.Buffer
	at := func(level slog.Level) watermill.LoggerAdapter {
		buf.Reset()
		return Plumbing(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})))
	}

	l := at(slog.LevelInfo)
	l.Info("subscribing", watermill.LogFields{"topic": "t"})
	l.Debug("debug", nil)
	l.Trace("trace", nil)
	if buf.Len() != 0 {
		t.Errorf("at info level, Watermill's info, debug and trace lines were logged: %s", buf.String())
	}
	l.Error("failed", errors.New("boom"), watermill.LogFields{"topic": "t"})
	if got := buf.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "error=boom") || !strings.Contains(got, "topic=t") {
		t.Errorf("error line = %q", got)
	}

	l = at(slog.LevelDebug).With(watermill.LogFields{"subscriber": "s1"})
	l.Info("subscribing", watermill.LogFields{"topic": "t"})
	if got := buf.String(); !strings.Contains(got, "level=DEBUG") || !strings.Contains(got, "subscriber=s1") || !strings.Contains(got, "topic=t") {
		t.Errorf("info line at debug level = %q", got)
	}
}

func TestBusinessKeepsInfo(t *testing.T) {
	var buf bytes.Buffer
	l := Business(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.With(watermill.LogFields{"topic": "orders.replies"}).Info("Tail reader resumed reading a partition", watermill.LogFields{"partition": 1})
	if got := buf.String(); !strings.Contains(got, "level=INFO") || !strings.Contains(got, "topic=orders.replies") || !strings.Contains(got, "partition=1") {
		t.Errorf("recovery line at info level = %q", got)
	}
}
