package idempotency_test

import (
	"context"
	"fmt"
	"time"

	"github.com/koto-dev/watermill-koto/idempotency"
)

func ExampleNewMemoryStore() {
	ctx := context.Background()
	store := idempotency.NewMemoryStore(time.Hour)
	defer store.Close()

	key := idempotency.ScopedKey("payments.order-placed-consumer", "0190f5e2-7a3c-7d4e-9b1a-2c3d4e5f6a7b")
	for attempt := 1; attempt <= 2; attempt++ {
		done, err := store.IsProcessed(ctx, key)
		if err != nil {
			panic(err)
		}
		if done {
			fmt.Printf("delivery %d: duplicate, skipped\n", attempt)
			continue
		}
		fmt.Printf("delivery %d: handled\n", attempt)
		if err := store.MarkProcessed(ctx, key); err != nil {
			panic(err)
		}
	}
	// Output:
	// delivery 1: handled
	// delivery 2: duplicate, skipped
}
