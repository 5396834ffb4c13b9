package broker

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestBatchFetchWaitIsBoundedByMaxWait: a batch subscriber's fetches wait
// at most its batches' MaxWait (at least a millisecond); other
// subscribers keep sarama's fetch wait.
func TestBatchFetchWaitIsBoundedByMaxWait(t *testing.T) {
	sarDefault := sarama.NewConfig().Consumer.MaxWaitTime
	for _, tc := range []struct {
		batch BatchConfig
		want  time.Duration
	}{
		{BatchConfig{}, sarDefault}, // not a batch subscriber
		{BatchConfig{MaxWait: 10 * time.Millisecond}.WithDefaults(), 10 * time.Millisecond},
		{BatchConfig{MaxWait: 100 * time.Microsecond}.WithDefaults(), time.Millisecond},
		{BatchConfig{MaxWait: time.Hour}.WithDefaults(), sarDefault},
	} {
		cfg := Config{Brokers: []string{"127.0.0.1:9092"}, Batch: tc.batch}
		cfg.setDefaults()
		if got := cfg.subscriberBase().Consumer.MaxWaitTime; got != tc.want {
			t.Errorf("Batch.MaxWait %v: fetch wait %v, want %v", tc.batch.MaxWait, got, tc.want)
		}
	}
}
