// Package imports uses payload types from other packages: a versioned
// module path (pgx/v5), a package named like the stem runtime, generics,
// and composite types; and steps that are plain functions.
package imports

import (
	"context"

	localrt "example.com/stemcase/internal/runtime"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stemflow/stem/runtime"
)

// Page is a generic payload.
type Page[T any] struct {
	Items []T
	Next  *string `json:"next,omitempty"`
}

// Sync copies a page of names.
//
//stem:workflow name=imports.sync
func Sync(ctx *SyncContext, in Page[pgtype.Text]) (map[string]*uuid.UUID, error) {
	info, err := ctx.Inspect(localrt.Info{N: len(in.Items)}, [2]bool{true, false})
	if err != nil {
		return nil, err
	}
	return ctx.Assign(info, struct {
		Limit int `json:"limit"`
	}{Limit: 10})
}

// Inspect takes a parameter named like the runtime's package.
//
//stem:step name=inspect timeout=1h30m
func Inspect(ctx context.Context, runtime localrt.Info, flags [2]bool) (Page[pgtype.Text], error) {
	return Page[pgtype.Text]{}, nil
}

// Assign gives every item an ID.
//
//stem:step name=assign retries=2 backoff=1500us
func Assign(ctx runtime.StepContext, page Page[pgtype.Text], opts struct {
	Limit int `json:"limit"`
}) (map[string]*uuid.UUID, error) {
	return map[string]*uuid.UUID{}, nil
}
