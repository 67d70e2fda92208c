package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// memberPackage is the command that process members run.
const memberPackage = "github.com/tenure-go/tenure/sim/cluster/etcdmember"

// built is the etcdmember binary built by this process, shared by all its
// clusters: it is built once per process.
var built cachedBinary

// cachedBinary is a binary this process builds once, on first use.
type cachedBinary struct {
	mu   sync.Mutex
	path string
}

// memberCommand returns the command line that runs a process member of
// cfg, before the member's flags: the member binary (cfg.MemberBinary, or
// one memberBinary builds), behind taskset with cfg.MemberCPUs.
func memberCommand(ctx context.Context, cfg Config) ([]string, error) {
	bin := cfg.MemberBinary
	if bin == "" {
		var err error
		if bin, err = memberBinary(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.MemberCPUs == "" {
		return []string{bin}, nil
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		return nil, fmt.Errorf("cluster: member CPUs %q: %w", cfg.MemberCPUs, err)
	}
	return []string{taskset, "-c", cfg.MemberCPUs, bin}, nil
}

// memberBinary returns the path of an etcdmember binary built from the
// source of the current module, building it on first use.
//
// It runs go build in the current directory, as go test and go run leave
// it, so the binary comes from the same source and dependency versions as
// the caller. The go command's build cache makes the build cheap after the
// first (about a second: mostly the link). The binary lands in the user's
// cache directory under its content hash, by an atomic rename, so test
// processes that run at once never execute a half-written or a different
// binary, and a binary built from other source gets another name. Binaries
// unused for a week are removed.
func memberBinary(ctx context.Context) (string, error) {
	return built.build(ctx, "etcdmember", memberPackage, " (set Config.MemberBinary where no Go toolchain is at hand)")
}

// build returns the path of b, go build's binary of pkg made in the current
// directory, building it on first use, as memberBinary says: into the
// user's cache directory as name-<content hash>, by an atomic rename. hint
// is added to the error of a failed build.
func (b *cachedBinary) build(ctx context.Context, name, pkg, hint string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.path != "" {
		if _, err := os.Stat(b.path); err == nil {
			return b.path, nil
		}
	}
	dir, err := binaryDir()
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("cluster: build %s: %w", pkg, err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, name)
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cluster: build %s%s: %w: %s", pkg, hint, err, bytes.TrimSpace(stderr.Bytes()))
	}
	sum, err := fileHash(out)
	if err != nil {
		return "", fmt.Errorf("cluster: build %s: %w", pkg, err)
	}
	path := filepath.Join(dir, name+"-"+sum)
	if _, err := os.Stat(path); err == nil {
		now := time.Now()
		_ = os.Chtimes(path, now, now)
	} else if err := os.Rename(out, path); err != nil {
		return "", fmt.Errorf("cluster: build %s: %w", pkg, err)
	}
	prune(dir, path)
	b.path = path
	return path, nil
}

// binaryDir returns the directory for member binaries, creating it.
func binaryDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "tenure", "sim-cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cluster: member binary directory: %w", err)
	}
	return dir, nil
}

func fileHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// prune removes, best effort, binaries other than keep unused for a week and
// build directories that a killed process left a day ago.
func prune(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		info, err := e.Info()
		if err != nil || path == keep {
			continue
		}
		age := time.Since(info.ModTime())
		switch {
		case strings.HasPrefix(e.Name(), "etcdmember-") && age > 7*24*time.Hour:
			_ = os.Remove(path)
		case strings.HasPrefix(e.Name(), "build-") && age > 24*time.Hour:
			_ = os.RemoveAll(path)
		}
	}
}
