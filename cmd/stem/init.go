package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/stemflow/stem/storage"
	"github.com/stemflow/stem/stores/storeurl"
)

// jsonInit is what stem init did: result is "created", "migrated" or
// "current".
type jsonInit struct {
	Store       string `json:"store"`
	Result      string `json:"result"`
	FromVersion int    `json:"from_version"`
	ToVersion   int    `json:"to_version"`
}

// initStore creates the store or migrates it: the one command that does.
func initStore(*flag.FlagSet) func(*call, []string) error {
	return func(c *call, _ []string) error {
		r, err := storeurl.Init(c.ctx, c.g.storeURL(), storeurl.Options{DialTimeout: dialTimeout, Logger: slog.New(slog.DiscardHandler)})
		switch {
		case errors.Is(err, storage.ErrNotStore):
			return c.openError(err)
		case err != nil:
			return openError{fmt.Sprintf("cannot initialise the store %s: %s", c.g.storeName(), oneLine(trimPrefixes(err.Error())))}
		}
		if c.out.json {
			result := "current"
			switch {
			case r.From == 0:
				result = "created"
			case r.From < r.To:
				result = "migrated"
			}
			return c.out.encode(jsonInit{Store: r.Store, Result: result, FromVersion: r.From, ToVersion: r.To})
		}
		_, err = fmt.Fprintln(c.out.w, r)
		return err
	}
}
