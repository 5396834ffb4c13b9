package kototest

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadAll returns every record of topic up to its end offsets at the
// call, byte for byte, partition by partition in offset order: what the
// tests compare with what a client wrote.
func ReadAll(t testing.TB, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	adm := client(t, brokers)
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	adm.Close()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("kototest: end offsets of %s: %v", topic, err)
	}
	want := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			offsets[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	if err != nil {
		t.Fatalf("kototest: reader of %s: %v", topic, err)
	}
	defer cl.Close()
	byPartition := map[int32][]*kgo.Record{}
	for len(want) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatalf("kototest: read %s: %v", topic, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset < end {
				byPartition[r.Partition] = append(byPartition[r.Partition], r)
				if r.Offset == end-1 {
					delete(want, r.Partition)
				}
			}
		})
	}
	var out []*kgo.Record
	for _, p := range slices.Sorted(maps.Keys(byPartition)) {
		out = append(out, byPartition[p]...)
	}
	return out
}

// Records returns how many records topic holds over all its partitions; 0
// when it does not exist.
func Records(t testing.TB, brokers []string, topic string) int64 {
	t.Helper()
	cl := client(t, brokers)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("kototest: end offsets of %s: %v", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n
}
