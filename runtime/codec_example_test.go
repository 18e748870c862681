package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
)

// Rotating the key that encrypts payloads at rest: the engine seals with
// the newest key and opens what the older ones sealed; an engine without
// the key gets an error matching ErrSealed, never a zero value.
func ExampleNewAESGCMCodec() {
	oldKey := []byte("0123456789abcdef0123456789abcdef") // from your secret store
	newKey := []byte("fedcba9876543210fedcba9876543210")
	store := memstore.New(memstore.Options{})
	defer store.Close()
	ctx := context.Background()
	engineWith := func(keys ...[]byte) *runtime.Engine {
		codec, err := runtime.NewAESGCMCodec(keys[0], keys[1:]...)
		if err != nil {
			panic(err)
		}
		e, err := runtime.New(runtime.Config{Store: store, Codec: codec, PollInterval: 10 * time.Millisecond})
		if err != nil {
			panic(err)
		}
		if err := runtime.Register(e, "echo", func(c *runtime.WorkflowContext, s string) (string, error) { return s, nil }); err != nil {
			panic(err)
		}
		return e
	}
	result := func(e *runtime.Engine, id string) (string, error) {
		run, err := runtime.Get[string](ctx, e, "echo", id)
		if err != nil {
			return "", err
		}
		return run.Result(ctx)
	}

	before := engineWith(oldKey)
	run, _ := runtime.Start[string, string](ctx, before, "echo", "sealed with the old key")
	runCtx, stop := context.WithCancel(ctx)
	go before.Run(runCtx)
	out, err := run.Result(ctx)
	fmt.Println(out, err)
	stop()
	before.Close()

	rotated := engineWith(newKey, oldKey)
	out, err = result(rotated, run.ID())
	fmt.Println(out, err)

	_, err = result(engineWith(newKey), run.ID())
	var sealed *runtime.SealedError
	fmt.Println(errors.Is(err, runtime.ErrSealed), errors.As(err, &sealed) && sealed.KeyID == runtime.AESGCMKeyID(oldKey))
	// Output:
	// sealed with the old key <nil>
	// sealed with the old key <nil>
	// true true
}
