package middleware_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/koto-dev/watermill-koto/correlation"
	"github.com/koto-dev/watermill-koto/middleware"
)

func TestNewLogHandler(t *testing.T) {
	logs := &logCapture{}
	logger := slog.New(middleware.NewLogHandler(logs.logger().Handler())).With("service", "billing")
	ctx := correlation.WithID(context.Background(), "corr-7")
	logger.InfoContext(ctx, "with id")
	logger.InfoContext(context.Background(), "without id")
	logger.InfoContext(ctx, "explicit", "correlation_id", "mine")
	logger.DebugContext(ctx, "debug is kept by the inner handler's level")

	lines := logs.lines(t)
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4", len(lines))
	}
	if lines[0]["correlation_id"] != "corr-7" || lines[0]["service"] != "billing" {
		t.Errorf("with id: %v", lines[0])
	}
	if _, has := lines[1]["correlation_id"]; has {
		t.Errorf("without id: %v", lines[1])
	}
	if lines[2]["correlation_id"] != "mine" {
		t.Errorf("explicit attribute overwritten: %v", lines[2])
	}
}
