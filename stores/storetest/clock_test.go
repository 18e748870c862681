package storetest

import (
	"sync"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	c := NewClock(Start)
	if got := c.Now(); !got.Equal(Start) {
		t.Fatalf("Now = %v, want %v", got, Start)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { c.Advance(time.Millisecond) })
	}
	wg.Wait()
	if got, want := c.Now(), Start.Add(10*time.Millisecond); !got.Equal(want) {
		t.Fatalf("Now after 10 advances = %v, want %v", got, want)
	}
	later := Start.Add(time.Hour)
	c.Set(later)
	if got := c.Now(); !got.Equal(later) {
		t.Fatalf("Now after Set = %v, want %v", got, later)
	}
}
