package kototest

import "sync"

// Counter counts calls per key, such as a handler's runs per message. It
// is safe for concurrent use; the zero value is ready.
type Counter struct {
	mu sync.Mutex
	m  map[string]int
}

// Add counts one call of key and returns how many there were.
func (c *Counter) Add(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[key]++
	return c.m[key]
}

// Get returns how many calls of key were counted.
func (c *Counter) Get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

// Distinct returns how many keys were counted.
func (c *Counter) Distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Total returns the sum of all counts.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.m {
		n += v
	}
	return n
}
