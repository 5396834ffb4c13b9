package idempotency

// shardOf picks the shard of a key from its length and its first and last
// eight bytes, where message UUIDs, offsets and scoped keys differ. It only
// spreads load: keys that share those bytes still work, on one shard.
func shardOf(key string) uint {
	h := uint64(len(key))
	n := min(len(key), 8)
	for i := range n {
		h = (h ^ uint64(key[i])) * 0x100000001b3
	}
	for i := len(key) - n; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * 0x100000001b3
	}
	h ^= h >> 33 // finalise so that every input bit reaches the low bits
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return uint(h % shardCount)
}
