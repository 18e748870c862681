package runtime

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stemflow/stem/storage"
)

// KeyedCodec is a Codec that names the keys it holds, as NewAESGCMCodec's
// does. An engine lists them in its worker record (storage.Worker.KeyIDs),
// so that an operator's command refuses to seal a payload with a key no
// live worker holds. A Codec that wraps NewAESGCMCodec's should implement
// it too, returning the wrapped codec's KeyIDs: else its workers hold no
// key as the stem command sees them, and its sealed writes are refused.
type KeyedCodec interface {
	Codec
	// KeyIDs returns the IDs of the keys the codec opens payloads with,
	// the one it seals with first. Each is what a *SealedError's KeyID
	// names, and what storage.CheckKeyID accepts.
	KeyIDs() []string
}

// CodecKeyIDs returns the IDs of the keys c holds, the one it seals with
// first (see KeyedCodec), or nil for nil or a codec that names none.
func CodecKeyIDs(c Codec) []string {
	k, ok := c.(KeyedCodec)
	if !ok {
		return nil
	}
	return k.KeyIDs()
}

// KeyIDs returns the IDs of the codec's keys, newest first (see
// AESGCMKeyID).
func (c *aesGCM) KeyIDs() []string { return slices.Clone(c.ids) }

var _ KeyedCodec = (*aesGCM)(nil)

// recordKeyIDs is ids as a worker record can hold them: the valid ones, at
// most storage.MaxWorkerKeyIDs, nil for none.
func recordKeyIDs(ids []string) []string {
	var out []string
	for _, id := range ids {
		if len(out) == storage.MaxWorkerKeyIDs {
			break
		}
		if storage.CheckKeyID(id) == nil && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// sealedKeys is what an engine knows of the keys it lacks: the key IDs of
// the payloads it claimed and could not open, which its worker record
// lists, and the workflows it leaves to other workers for a while because
// they hold such a key.
type sealedKeys struct {
	mu sync.Mutex
	// missing are the key IDs met, oldest first, at most
	// storage.MaxWorkerKeyIDs.
	missing []string
	// excluded holds, by workflow, until when the engine claims none of
	// its runs.
	excluded map[string]time.Time
	// changed is signalled when missing grows, so the worker record is put
	// again at once.
	changed chan struct{}
}

// changes returns the channel signalled when the missing key IDs grow.
func (k *sealedKeys) changes() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.changed == nil {
		k.changed = make(chan struct{}, 1)
	}
	return k.changed
}

// missingIDs returns the key IDs met and not held, nil for none.
func (k *sealedKeys) missingIDs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.missing)
}

// miss records id as missing and says whether it was new.
func (k *sealedKeys) miss(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if slices.Contains(k.missing, id) || storage.CheckKeyID(id) != nil {
		return false
	}
	if len(k.missing) == storage.MaxWorkerKeyIDs {
		k.missing = k.missing[1:]
	}
	k.missing = append(k.missing, id)
	if k.changed == nil {
		k.changed = make(chan struct{}, 1)
	}
	select {
	case k.changed <- struct{}{}:
	default:
	}
	return true
}

// exclude leaves workflow's runs to other workers until until.
func (k *sealedKeys) exclude(workflow string, until time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.excluded == nil {
		k.excluded = map[string]time.Time{}
	}
	k.excluded[workflow] = until
}

// claimable returns the workflows of names the engine claims at now: all
// but those it leaves to other workers. It returns names itself when none
// is left, so the common case allocates nothing.
func (k *sealedKeys) claimable(now time.Time, names []string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.excluded) == 0 {
		return names
	}
	out := make([]string, 0, len(names))
	for _, name := range names {
		if until, ok := k.excluded[name]; ok {
			if now.Before(until) {
				continue
			}
			delete(k.excluded, name)
		}
		out = append(out, name)
	}
	return out
}

// handBackDelay is how long a run this engine cannot open, and no other
// live worker can either, waits before it is ready again: long enough
// that no engine spins on it. It is also how long an engine leaves a
// workflow to the workers that hold a key it lacks.
func (e *Engine) handBackDelay() time.Duration {
	return min(max(10*e.cfg.PollInterval, time.Second), time.Minute)
}

// lacksKey is called when a run of workflow is sealed with key ID id,
// which this engine's codec does not hold. It records the key in the
// engine's worker record (logging it the first time), and returns the IDs
// of the other live workers that hold the key and serve the workflow: when
// there are some, the engine leaves the workflow to them for
// handBackDelay, so it neither delays the run nor claims it again and
// again. Listing the workers failing is as if none held the key.
func (e *Engine) lacksKey(ctx context.Context, id, workflow string) []string {
	if e.sealed.miss(id) {
		e.log.Warn("stem: a run is sealed with a codec key this engine does not hold; it hands such runs back to workers that hold the key (configure this worker's codec with it)",
			"worker", e.cfg.WorkerID, "key_id", id, "holds", CodecKeyIDs(e.payloads.codec), "workflow", workflow)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), letGoTimeout)
	defer cancel()
	workers, err := e.store.ListWorkers(ctx)
	if err != nil {
		return nil
	}
	var holders []string
	for _, w := range workers {
		if w.ID != e.cfg.WorkerID && slices.Contains(w.KeyIDs, id) && slices.Contains(w.Workflows, workflow) {
			holders = append(holders, w.ID)
		}
	}
	if len(holders) > 0 {
		e.sealed.exclude(workflow, e.clock.Now().Add(e.handBackDelay()))
	}
	return holders
}

// SealedKeyID returns the ID of the key a stored payload is sealed with
// (see AESGCMKeyID), or "" when it is plaintext or sealed by a codec that
// does not name its key.
func SealedKeyID(stored []byte) string {
	if !isKeyringFrame(stored) || len(stored) < keyringHeader {
		return ""
	}
	return hex.EncodeToString(stored[len(sealMagic)+1 : keyringHeader])
}

// ErrKeyNotHeld marks a write refused because it would be sealed with a
// codec key that no live worker holds (see Engine.CheckSealKey).
var ErrKeyNotHeld = errors.New("no live worker holds the codec key")

// SealKeyID returns the ID of the key the engine's codec seals payloads
// with, or "" when it has no codec or one that names no key (KeyedCodec).
func (e *Engine) SealKeyID() string {
	if ids := CodecKeyIDs(e.cfg.Codec); len(ids) > 0 {
		return ids[0]
	}
	return ""
}

// CheckKeyHeld checks that a live worker holds the codec key with ID id,
// before a tool writes a payload sealed with it: the workers could never
// open one sealed with another key. It returns how many live workers are
// recorded; with none, it returns 0 and no error, since a deployment may
// write before its first worker starts and nothing says which key that
// worker will hold. Otherwise an error wrapping ErrKeyNotHeld names the
// key IDs the live workers hold. An empty id (a plaintext write) passes.
func (e *Engine) CheckKeyHeld(ctx context.Context, id string) (live int, err error) {
	if id == "" {
		return 0, nil
	}
	workers, err := e.Workers(ctx)
	if err != nil || len(workers) == 0 {
		return 0, err
	}
	var held []string
	for _, w := range workers {
		if slices.Contains(w.KeyIDs, id) {
			return len(workers), nil
		}
		for _, k := range w.KeyIDs {
			if !slices.Contains(held, k) {
				held = append(held, k)
			}
		}
	}
	holds := "no codec key"
	if len(held) > 0 {
		holds = "key IDs " + strings.Join(held, ", ")
	}
	return len(workers), fmt.Errorf("%w: key ID %s is held by none of the %d live worker(s), which hold %s", ErrKeyNotHeld, id, len(workers), holds)
}
