package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
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
