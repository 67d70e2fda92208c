package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Command runs the bench from command-line arguments (the flags of `go run
// ./sim bench -h`): the markdown report goes to stdout (and -out), the SVG
// plot to -svg, progress lines to stderr.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Rounds, "rounds", 0, "interleaved rounds per comparison (0: 5; -quick: 2, and 1 for failover)")
	fs.BoolVar(&cfg.Quick, "quick", false, "a fast smoke run: fewer operations and rounds, same rows")
	only := fs.String("only", "", "comma-separated comparisons to run ("+strings.Join(Comparisons, ",")+"); empty: all")
	fs.StringVar(&cfg.RedisServer, "redis-server", "", "redis-server executable (empty: from PATH; missing: Redis rows skipped)")
	out := fs.String("out", "", "also write the markdown report to this file")
	svg := fs.String("svg", "", "write an SVG plot of the ratios to this file")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *only != "" {
		for _, o := range strings.Split(*only, ",") {
			cfg.Only = append(cfg.Only, strings.TrimSpace(o))
		}
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	rep, err := Run(ctx, cfg, nil)
	if err != nil {
		return err
	}
	rep.Command = strings.TrimSpace("go run ./sim bench " + strings.Join(args, " "))
	var md bytes.Buffer
	if err := WriteMarkdown(&md, rep); err != nil {
		return err
	}
	if _, err := stdout.Write(md.Bytes()); err != nil {
		return err
	}
	if *out != "" {
		if err := os.WriteFile(*out, md.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if *svg != "" {
		var b bytes.Buffer
		if err := WriteSVG(&b, rep); err != nil {
			return err
		}
		if err := os.WriteFile(*svg, b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
