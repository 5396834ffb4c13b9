package idempotency_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/koto-dev/watermill-koto/idempotency"
)

func TestMemoryStoreMarksAndChecks(t *testing.T) {
	ctx := context.Background()
	s := idempotency.NewMemoryStore(0)
	defer s.Close()
	if s.Window() != idempotency.DefaultWindow {
		t.Fatalf("window 0 gave %v, want DefaultWindow", s.Window())
	}
	var store idempotency.Store = s
	if ok, err := store.IsProcessed(ctx, "a"); ok || err != nil {
		t.Fatalf("IsProcessed before any mark = %v, %v", ok, err)
	}
	for range 2 { // marking twice is fine
		if err := store.MarkProcessed(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := store.IsProcessed(ctx, "a"); !ok || err != nil {
		t.Fatalf("IsProcessed after MarkProcessed = %v, %v", ok, err)
	}
	if ok, _ := store.IsProcessed(ctx, "b"); ok {
		t.Fatal("an unmarked key is processed")
	}
	if s.Len() != 1 {
		t.Fatalf("Len = %d after marking one key twice", s.Len())
	}
}

// TestMemoryStoreExpires uses the real clock: a mark must stop counting
// once the window has passed. It polls instead of timing.
func TestMemoryStoreExpires(t *testing.T) {
	ctx := context.Background()
	s := idempotency.NewMemoryStore(20 * time.Millisecond)
	defer s.Close()
	if err := s.MarkProcessed(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, _ := s.IsProcessed(ctx, "k")
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a 20 ms mark still counts after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestMemoryStoreConcurrentUse(t *testing.T) {
	ctx := context.Background()
	s := idempotency.NewMemoryStore(time.Hour)
	defer s.Close()
	const workers, perWorker = 8, 2000
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range perWorker {
				key := strconv.Itoa(i) // every worker marks the same keys
				if _, err := s.IsProcessed(ctx, key); err != nil {
					t.Error(err)
				}
				if err := s.MarkProcessed(ctx, key); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if s.Len() != perWorker {
		t.Fatalf("Len = %d, want %d distinct keys", s.Len(), perWorker)
	}
	for i := range perWorker {
		if ok, _ := s.IsProcessed(ctx, strconv.Itoa(i)); !ok {
			t.Fatalf("key %d lost", i)
		}
	}
}

func TestMemoryStoreCloseStopsSweeper(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := idempotency.NewMemoryStore(time.Millisecond)
	if err := s.MarkProcessed(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.MarkProcessed(context.Background(), "k2"); err != nil {
		t.Fatalf("MarkProcessed after Close: %v", err)
	}
}
