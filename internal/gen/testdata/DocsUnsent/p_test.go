package p

import (
	"context"
	"testing"

	"github.com/stemflow/stem/runtime"
)

func TestPong(t *testing.T) {
	var e *runtime.Engine
	if e != nil {
		_, _ = EmitPong(context.Background(), e, Pong{})
	}
}
