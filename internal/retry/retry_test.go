package retry_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/koto-dev/watermill-koto/internal/retry"
)

var errOp = errors.New("op failed")

// failing returns an op that fails n times, then succeeds, counting calls.
func failing(n int, calls *int) func() error {
	return func() error {
		*calls++
		if *calls <= n {
			return errOp
		}
		return nil
	}
}

func delays(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }

func TestDoRetriesUntilSuccess(t *testing.T) {
	var calls int
	var seen []retry.Failure
	err := retry.Do(context.Background(), func(n int) time.Duration { return time.Duration(n) * time.Microsecond },
		failing(3, &calls), func(f retry.Failure) error { seen = append(seen, f); return nil }, nil)
	if err != nil || calls != 4 {
		t.Fatalf("Do = %v after %d calls, want nil after 4", err, calls)
	}
	for i, f := range seen {
		if f.Retry != i+1 || f.Delay != time.Duration(i)*time.Microsecond || !errors.Is(f.Err, errOp) {
			t.Errorf("failure %d = %+v, want retry %d with delay(%d)", i, f, i+1, i)
		}
	}
}

func TestDoStopsWhenNextSaysSo(t *testing.T) {
	var calls int
	final := errors.New("final")
	err := retry.Do(context.Background(), delays(0), failing(10, &calls),
		func(f retry.Failure) error {
			if f.Retry == 2 {
				return final
			}
			return nil
		}, nil)
	if !errors.Is(err, final) || calls != 2 {
		t.Fatalf("Do = %v after %d calls, want the error of next after 2", err, calls)
	}
}

func TestDoEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls int
	wrapped := errors.New("interrupted")
	err := retry.Do(ctx, delays(time.Hour), failing(10, &calls),
		func(retry.Failure) error { cancel(); return nil },
		func(err error) error { return errors.Join(wrapped, err) })
	if !errors.Is(err, wrapped) || !errors.Is(err, errOp) || calls != 1 {
		t.Fatalf("Do = %v after %d calls, want the last error through interrupted after 1", err, calls)
	}
	calls = 0
	err = retry.Do(ctx, delays(time.Hour), failing(10, &calls), func(retry.Failure) error { return nil }, nil)
	if !errors.Is(err, errOp) {
		t.Fatalf("Do without interrupted = %v, want the last error as is", err)
	}
}

// TestSleepEndsWithContext: Sleep returns as soon as ctx ends, with its
// error, and nil after a whole wait.
func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := retry.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep after cancel = %v, want context.Canceled", err)
	}
	if err := retry.Sleep(context.Background(), time.Nanosecond); err != nil {
		t.Fatalf("Sleep of a whole wait = %v, want nil", err)
	}
}

func TestAfterProgressCountsAgain(t *testing.T) {
	var retries []int
	calls := 0
	err := retry.Do(context.Background(), func(int) time.Duration { return 0 }, func() error {
		calls++
		switch calls {
		case 1, 2:
			return errors.New("down")
		case 3:
			return retry.AfterProgress(errors.New("down after progress"))
		case 4:
			return errors.New("down again")
		}
		return nil
	}, func(f retry.Failure) error {
		retries = append(retries, f.Retry)
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 1, 2}; !slices.Equal(retries, want) {
		t.Fatalf("retries %v, want %v: a failure after progress counts from the start", retries, want)
	}
	if retry.AfterProgress(nil) != nil {
		t.Fatal("AfterProgress(nil) is not nil")
	}
}
