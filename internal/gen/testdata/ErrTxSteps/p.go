package p

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stemflow/stem/runtime"
)

type Steps struct{}

//stem:workflow name=p.flow existing=replce ended=reuse_failed
func Flow(ctx *FlowContext, n int) (int, error) {
	f := ctx.PayAsync(n)
	if _, err := f.Await(); err != nil {
		return 0, err
	}
	return ctx.Pay(n)
}

//stem:workflow name=p.other existing=reuse ended=fail
func Other(ctx *OtherContext, n int) (int, error) { return n, nil }

//stem:step name=pay tx
func (s *Steps) Pay(ctx runtime.StepContext, tx pgx.Tx, n int) (int, error) { return n, nil }

//stem:step name=cache tx
func (s *Steps) Cache(ctx runtime.StepContext, pipe redis.Pipeliner, n int) error { return nil }

//stem:step name=none tx
func (s *Steps) None(ctx runtime.StepContext) error { return nil }

//stem:step name=pointer tx
func (s *Steps) Pointer(ctx context.Context, tx *pgx.Tx) error { return nil }

//stem:step name=value tx
func Value(ctx context.Context, tx sql.Tx, n int) error { return nil }

//stem:step name=twice tx
func Twice(ctx context.Context, tx *sql.Tx, again *sql.Tx) error { return nil }

//stem:step name=unmarked
func Unmarked(ctx context.Context, tx pgx.Tx, n int) error { return nil }

//stem:step name=later
func Later(ctx context.Context, n int, tx *sql.Tx) error { return nil }

//stem:step name=notfirst tx
func NotFirst(ctx context.Context, n int, tx *sql.Tx) error { return nil }
