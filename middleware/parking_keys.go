package middleware

import (
	"context"
	"sync"

	koto "github.com/koto-dev/watermill-koto"
)

// parkedKeys remembers, per consumer group and partition, the record keys
// that have messages parked: a superset, read from the store when a
// message of a newer group generation arrives (the partition may have had
// another owner meanwhile), kept up as this process parks, and pruned when
// the store finds a key's queue empty. The store decides; a key missing
// here would let a message overtake its key's parked ones, one too many
// costs a query.
type parkedKeys struct {
	mu    sync.Mutex
	parts map[partitionOf]*partitionKeys
}

// partitionOf names a partition of a consumer group.
type partitionOf struct {
	group, topic string
	partition    int32
}

// partitionKeys is the parked keys of one partition.
type partitionKeys struct {
	mu         sync.Mutex // held while they load
	loaded     bool
	generation int32
	keys       map[string]struct{}
}

func (k *parkedKeys) of(group string, pos koto.Position) *partitionKeys {
	id := partitionOf{group: group, topic: pos.Topic, partition: pos.Partition}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.parts == nil {
		k.parts = map[partitionOf]*partitionKeys{}
	}
	p, ok := k.parts[id]
	if !ok {
		p = &partitionKeys{}
		k.parts[id] = p
	}
	return p
}

// known reports whether pos's key may have messages parked for group,
// when the keys of pos's generation are loaded: ok is false when they
// must be read first. It takes no store call, for the path of a message
// whose key nothing is parked for.
func (k *parkedKeys) known(group string, pos koto.Position) (parked, ok bool) {
	p := k.of(group, pos)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.loaded || pos.Generation > p.generation {
		return false, false
	}
	_, parked = p.keys[string(pos.Key)]
	return parked, true
}

// parked reports whether pos's key may have messages parked for group,
// loading the partition's keys with load first when pos is of a newer
// generation than those known. The other messages of the partition wait
// for the load.
func (k *parkedKeys) parked(ctx context.Context, group string, pos koto.Position,
	load func(ctx context.Context) ([][]byte, error)) (bool, error) {
	p := k.of(group, pos)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.loaded || pos.Generation > p.generation {
		keys, err := load(ctx)
		if err != nil {
			return false, err
		}
		p.keys = make(map[string]struct{}, len(keys))
		for _, key := range keys {
			p.keys[string(key)] = struct{}{}
		}
		p.loaded, p.generation = true, pos.Generation
	}
	_, ok := p.keys[string(pos.Key)]
	return ok, nil
}

// add records that pos's key has a message parked for group.
func (k *parkedKeys) add(group string, pos koto.Position) {
	k.set(group, pos, true)
}

// remove records that pos's key has no message parked for group.
func (k *parkedKeys) remove(group string, pos koto.Position) {
	k.set(group, pos, false)
}

func (k *parkedKeys) set(group string, pos koto.Position, parked bool) {
	p := k.of(group, pos)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.loaded {
		return // the load reads it
	}
	if parked {
		p.keys[string(pos.Key)] = struct{}{}
	} else {
		delete(p.keys, string(pos.Key))
	}
}
