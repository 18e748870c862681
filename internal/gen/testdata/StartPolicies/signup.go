// Package signup onboards users, one run per user, keyed by the user's ID.
package signup

import (
	"context"
	"time"

	"github.com/stemflow/stem/runtime"
)

// User is who signs up.
type User struct{ ID, Email string }

// Confirmed is the user's click on the confirmation link.
//
//stem:event topic=signup.confirmed
type Confirmed struct{ Code string }

// Onboard waits for the user's confirmation. A second start for a user
// whose onboarding is under way fails; one for a user whose onboarding
// ended starts it again.
//
//stem:workflow name=signup.onboard existing=fail ended=reuse
func Onboard(ctx *OnboardContext, u User) (string, error) {
	c, err := ctx.AwaitConfirmed("confirmed", 24*time.Hour)
	if err != nil {
		return "", err
	}
	return c.Code, nil
}

// Remind reminds a user once: a start for a user reminded before is
// refused.
//
//stem:workflow name=signup.remind ended=reject existing=return
func Remind(ctx *RemindContext, u User) (int, error) { return 1, nil }

// Welcome has the default policies.
//
//stem:workflow name=signup.welcome
func Welcome(ctx *WelcomeContext, u User) (int, error) { return 0, nil }

// Replace restarts a run that is under way.
//
//stem:workflow name=signup.replace existing=replace
func Replace(ctx *ReplaceContext, u User) (int, error) { return 0, nil }

// ConfirmLink is the handler of the confirmation link: it confirms the
// user's onboarding, starting it if the user never signed up.
func ConfirmLink(ctx context.Context, e *runtime.Engine, u User, code string) error {
	_, err := SendConfirmedOrStartOnboard(ctx, e, u.ID, u, Confirmed{Code: code})
	return err
}
