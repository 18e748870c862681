package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"

	"github.com/stemflow/stem/runtime"
	"github.com/stemflow/stem/stores/memstore"
	"github.com/stemflow/stem/ui"
)

// The dashboard mounted under a prefix of an application's server at
// ops.example.com, read only for requests without an operator's header
// (use your own authentication). It answers to the names it is told
// (besides localhost and IP addresses), so a page of another name that
// resolves to the server (DNS rebinding) gets nothing.
func ExampleNew() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	engine, err := runtime.New(runtime.Config{Store: store})
	if err != nil {
		panic(err)
	}
	defer engine.Close()

	dashboard := ui.New(engine, ui.Options{
		Authorize: func(r *http.Request) ui.Access {
			if r.Header.Get("X-Operator") != "" {
				return ui.AccessOperate
			}
			return ui.AccessRead
		},
		AllowedHosts: []string{"ops.example.com"},
	})
	mux := http.NewServeMux()
	mux.Handle("/ops/stem/", http.StripPrefix("/ops/stem", dashboard))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://ops.example.com/ops/stem/", nil))
	fmt.Println(rec.Code, rec.Header().Get("Location"))

	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://ops.example.com/ops/stem/runs", nil))
	fmt.Println(rec.Code, strings.Contains(rec.Body.String(), `<p id="no-runs" class="empty">No runs yet.</p>`))

	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://evil.example:8233/ops/stem/runs", nil))
	fmt.Println(rec.Code, rec.Header().Get("Set-Cookie") == "")
	// Output:
	// 302 ./runs
	// 200 true
	// 421 true
}

// appUser is who the application's session says a request is.
type appUser struct {
	Name  string
	Roles []string
}

// userKey carries the appUser in a request's context.
type userKey struct{}

// The dashboard behind the application's own authentication: a middleware
// that finds the user of the application's session cookie (here a map;
// yours reads your session store) and puts it in the request's context,
// sends the browsers of no one to the application's login, and an
// Authorize that answers from the user's roles: operators act, viewers
// only read, anyone else sees nothing.
func ExampleNew_authorize() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	engine, err := runtime.New(runtime.Config{Store: store})
	if err != nil {
		panic(err)
	}
	defer engine.Close()

	sessions := map[string]appUser{
		"s-ada": {Name: "ada", Roles: []string{"stem-operator"}},
		"s-bob": {Name: "bob", Roles: []string{"stem-viewer"}},
		"s-cy":  {Name: "cy"},
	}
	requireSession := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := r.Cookie("app_session")
			user, ok := appUser{}, false
			if err == nil {
				user, ok = sessions[c.Value]
			}
			if !ok {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
		})
	}
	dashboard := ui.New(engine, ui.Options{
		Authorize: func(r *http.Request) ui.Access {
			user, _ := r.Context().Value(userKey{}).(appUser)
			switch {
			case slices.Contains(user.Roles, "stem-operator"):
				return ui.AccessOperate
			case slices.Contains(user.Roles, "stem-viewer"):
				return ui.AccessRead
			}
			return ui.AccessNone
		},
	})
	mux := http.NewServeMux()
	mux.Handle("/ops/stem/", requireSession(http.StripPrefix("/ops/stem", dashboard)))

	for _, session := range []string{"", "s-ada", "s-bob", "s-cy"} {
		r := httptest.NewRequest(http.MethodGet, "http://localhost/ops/stem/runs", nil)
		if session != "" {
			r.AddCookie(&http.Cookie{Name: "app_session", Value: session})
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		line := fmt.Sprintf("%q: %d", session, rec.Code)
		if loc := rec.Header().Get("Location"); loc != "" {
			line += " to " + loc
		}
		if body := rec.Body.String(); rec.Code == http.StatusOK {
			line += fmt.Sprintf(", read-only %v, may start runs %v", strings.Contains(body, `class="readonly"`), strings.Contains(body, `id="start-link"`))
		}
		fmt.Println(line)
	}
	// Output:
	// "": 303 to /login?next=%2Fops%2Fstem%2Fruns
	// "s-ada": 200, read-only false, may start runs true
	// "s-bob": 200, read-only true, may start runs false
	// "s-cy": 403
}
