package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// export writes a run's current execution as a history file (see
// runtime.History), for stemtest.ReplayHistories to replay against later
// code.
func export(fs *flag.FlagSet) func(*call, []string) error {
	out := fs.String("out", "", "write the history to `FILE` (default: standard output)")
	return func(c *call, args []string) error {
		c.subject = args[0]
		e, err := c.open()
		if err != nil {
			return err
		}
		h, err := e.ExportHistory(c.ctx, args[0])
		if err != nil {
			return err
		}
		b, err := json.MarshalIndent(h, "", "  ")
		if err != nil {
			return err
		}
		b = append(b, '\n')
		if *out == "" {
			_, err := c.out.w.Write(b)
			return err
		}
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			return fmt.Errorf("writing the history: %w", err)
		}
		abs, _ := filepath.Abs(*out)
		fmt.Fprintf(c.out.w, "wrote the history of run %s (%s, execution %d, %d calls) to %s\n", h.RunID, h.Workflow, h.Execution, len(h.Calls), abs)
		return nil
	}
}
