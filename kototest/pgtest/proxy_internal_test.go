package pgtest

import (
	"testing"
	"time"
)

// TestRestoreEndsCutAndDelay: after Restore the proxy neither refuses
// connections nor delays what they carry.
func TestRestoreEndsCutAndDelay(t *testing.T) {
	p := &Proxy{}
	p.SetDelay(20 * time.Millisecond)
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
	p.Restore()
	if d := p.delayNow(); d != 0 {
		t.Errorf("delay after Restore = %v, want 0", d)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		t.Error("still cut after Restore")
	}
}
