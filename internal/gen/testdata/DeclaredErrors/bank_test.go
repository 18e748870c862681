package bank_test

import (
	"errors"
	"testing"

	bank "example.com/stemcase"
	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stemtest"
)

// The test kit's runs keep the declared errors' identity: the run's
// Result matches each with errors.Is and errors.As, fields and all.
func TestDeclaredErrorsInTheKit(t *testing.T) {
	env := stemtest.New(t, bank.RegisterWorkflows)
	result := func(kind string) error {
		run, err := bank.StartTransfer(env.Context(), env.Engine, kind, runtime.WithID(kind))
		if err != nil {
			t.Fatal(err)
		}
		_, err = run.Result(env.Context())
		return err
	}
	var le *bank.LimitError
	if err := result("limit"); !errors.As(err, &le) || le.Account != "A-1" || le.Limit != 100 || !errors.Is(err, bank.ErrInsufficientFunds) {
		t.Errorf("limit: %v, want a *LimitError with its fields that is ErrInsufficientFunds", err)
	}
	if err := result("frozen"); !errors.Is(err, bank.ErrFrozen) || !runtime.IsPermanent(err) {
		t.Errorf("frozen: %v, want ErrFrozen, permanent", err)
	}
	var rv bank.Review
	if err := result("review"); !errors.As(err, &rv) || rv.Reason != "fraud" || errors.Is(err, bank.ErrInsufficientFunds) {
		t.Errorf("review: %v, want a Review with its reason", err)
	}
}
