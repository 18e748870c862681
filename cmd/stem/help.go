package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stemflow/stem/storage"
)

func usage() string {
	var b strings.Builder
	b.WriteString(`usage: stem [--store URL] [--json] [--codec-key KEY | --codec-key-file PATH] COMMAND [ARGS]

Inspects and controls the workflow runs in a Stem store.

commands:
`)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		name := c.name
		for _, a := range c.aliases {
			name += ", " + a
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, c.summary)
	}
	fmt.Fprintf(tw, "  help\thelp on a command: stem help COMMAND (or stem COMMAND --help)\n")
	tw.Flush()
	b.WriteString(`
flags (before or after the command):
  --store URL            the store: a SQLite file (default stem.db, or $STEM_STORE),
                         or a postgres://, redis:// or redis+cluster:// URL; it
                         must exist, at this version's schema: stem init creates
                         or migrates it, no other command changes it (runs, show,
                         stream, workflows, queues, check, schedule list and show
                         only read)
  --json                 print JSON (snake_case names throughout); an action on a
                         run prints {"run_id", "action", "message", "run"}: what
                         it did in a word, in a sentence, and the run after it
  --codec-key KEY        the AES key (hex or base64, 16, 24 or 32 bytes) the workers
                         seal payloads with (Config.Codec); or $STEM_CODEC_KEY.
                         Several while keys rotate: repeat the flag or separate
                         them with commas, newest first; the command seals with
                         the first and opens what any of them sealed. A write
                         sealed with a key no live worker holds is refused
  --codec-key-file PATH  read the keys from a file: one a line, newest first

Exit status: 0 done; 1 the command failed (or the workflow replied to stem
update with an error); 2 it was called wrongly or given input it cannot
use (nothing was opened); 3 stem check found runs in flight
the build could not continue; 4 stem check could not judge (the code does
not generate what its manifests say, or its runs could not be replayed).
`)
	return b.String()
}

// help prints the command's help (or stem's) on stdout.
func (c *command) help(fs *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: stem %s %s\n", c.name, c.args)
	if len(c.aliases) > 0 {
		fmt.Fprintf(&b, "       (also: stem %s)\n", strings.Join(c.aliases, ", "))
	}
	fmt.Fprintf(&b, "\n%s\n", c.detail)
	var lines []string
	fs.VisitAll(func(f *flag.Flag) {
		if slices.Contains(globalFlags, f.Name) {
			return
		}
		name, use := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		line += "\t" + use
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			line += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		lines = append(lines, line)
	})
	if len(lines) > 0 {
		b.WriteString("\nflags:\n")
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		for _, l := range lines {
			fmt.Fprintln(tw, l)
		}
		tw.Flush()
	}
	b.WriteString("\nand stem's flags: --store URL, --json, --codec-key KEY, --codec-key-file PATH (see stem help)\n")
	return b.String()
}

func help(args []string, stdout, stderr io.Writer) int {
	switch len(args) {
	case 0:
		fmt.Fprint(stdout, usage())
		return 0
	case 1, 2:
		c := lookup(args[0])
		if c == nil {
			fmt.Fprintln(stderr, unknownCommand("stem help", args[0]))
			return 2
		}
		if len(args) == 2 {
			if len(c.subs) == 0 {
				break
			}
			if c = c.sub(args[1]); c == nil {
				fmt.Fprintln(stderr, unknownSub(lookup(args[0]), args[1]))
				return 2
			}
		}
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.setup(fs)
		fmt.Fprint(stdout, c.help(fs))
		return 0
	}
	i := min(len(args)-1, 1)
	if c := lookup(args[0]); c != nil && len(c.subs) > 0 {
		i = 2
	}
	fmt.Fprintf(stderr, "stem help: unexpected argument %q\n\nusage: stem help [COMMAND [SUBCOMMAND]]\n", args[i])
	return 2
}

// flagError rewords the flag package's "flag provided but not defined: -x"
// in the command's own terms, suggesting the nearest flag fs defines, and
// its "invalid value "v" for flag -x: parse error" as what the flag wants.
func flagError(fs *flag.FlagSet, err error) error {
	if m := invalidFlag.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("--%s %q: %s", m[2], m[1], flagWants(fs.Lookup(m[2]), m[3]))
	}
	const undefined = "flag provided but not defined: -"
	name, ok := strings.CutPrefix(err.Error(), undefined)
	if !ok {
		return err
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if best := nearest(name, names); best != "" {
		return fmt.Errorf("unknown flag --%s; did you mean --%s?", name, best)
	}
	return fmt.Errorf("unknown flag --%s", name)
}

// invalidFlag matches the flag package's error for a value a flag could
// not parse: the value, the flag's name and the reason.
var invalidFlag = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([^:]+): (.*)$`)

// flagWants says what flag f takes, from its default, or the flag
// package's reason when the default does not tell.
func flagWants(f *flag.Flag, reason string) string {
	if f == nil {
		return reason
	}
	if w, ok := f.Value.(interface{ wants() string }); ok {
		return w.wants()
	}
	if _, ok := f.Value.(interface{ IsBoolFlag() bool }); ok {
		return "want true or false"
	}
	if _, err := strconv.Atoi(f.DefValue); err == nil {
		return "want a whole number"
	}
	if _, err := time.ParseDuration(f.DefValue); err == nil {
		return "want a duration such as 500ms, 5s or 1m"
	}
	return reason
}

// nearest returns the candidate closest to name, or "" (storage.Nearest).
func nearest(name string, candidates []string) string {
	return storage.Nearest(name, candidates)
}

// unknownCommand says so, suggesting the nearest command.
func unknownCommand(prefix, name string) string {
	candidates := []string{"help"}
	for _, c := range commands {
		candidates = append(append(candidates, c.name), c.aliases...)
	}
	if best := nearest(name, candidates); best != "" {
		return fmt.Sprintf("%s: unknown command %q; did you mean %q? (stem help lists the commands)", prefix, name, best)
	}
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return fmt.Sprintf("%s: unknown command %q; the commands are %s, help", prefix, name, strings.Join(names, ", "))
}
