package idempotency

import "math/bits"

// shardOf picks the shard of a key from its length and its first and last
// eight bytes, where message UUIDs, offsets and scoped keys differ. It only
// spreads load: keys that share those bytes still work, on one shard.
func shardOf(key string) uint {
	n := len(key)
	h := uint64(n) * 0x9e3779b97f4a7c15
	if n >= 8 {
		h ^= load64(key) ^ bits.RotateLeft64(load64(key[n-8:]), 29)
	} else {
		for i := range n {
			h ^= uint64(key[i]) << (8 * i)
		}
	}
	h ^= h >> 33 // finalise so that every input bit reaches the low bits
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return uint(h % shardCount)
}

// load64 reads the first eight bytes of s, little-endian.
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
