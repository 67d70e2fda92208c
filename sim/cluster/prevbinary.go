package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// PreviousEtcd is the etcd release that PreviousMemberBinary builds
// against: the newest patch release of the minor before the one tenure's
// module requires. sim/cluster/internal/etcdprev/go.mod pins it.
const PreviousEtcd = "v3.6.16"

// memberspecPackage is the package that etcdmember imports for its flags and
// reports.
const memberspecPackage = "github.com/tenure-go/tenure/sim/cluster/internal/memberspec"

// prevBuilt is the previous-release binary built by this process.
var prevBuilt struct {
	mu   sync.Mutex
	path string
}

// PreviousMemberBinary returns the path of an etcdmember binary built
// against etcd PreviousEtcd, building it on first use, for
// Config.MemberBinary and SetMemberBinary: a rolling upgrade starts a
// cluster on it and moves each member to the current release.
//
// It copies the etcdmember command and the memberspec package from the
// source of the current module (go list finds it, as memberBinary's go
// build does) into a temporary module made of
// sim/cluster/internal/etcdprev's go.mod and go.sum, which pin etcd
// PreviousEtcd and its dependencies, and builds it there: one source, two
// etcd releases. The binary lands in the user's cache directory under the
// hash of what it was built from, so later runs find it without building.
// The first build downloads etcd PreviousEtcd's modules through the go
// command's module proxy.
func PreviousMemberBinary(ctx context.Context) (string, error) {
	prevBuilt.mu.Lock()
	defer prevBuilt.mu.Unlock()
	if prevBuilt.path != "" {
		if _, err := os.Stat(prevBuilt.path); err == nil {
			return prevBuilt.path, nil
		}
	}
	src, err := goList(ctx, memberPackage, memberspecPackage)
	if err != nil {
		return "", err
	}
	prev := filepath.Join(filepath.Dir(src[memberspecPackage]), "etcdprev")
	const module = "tenure-sim/etcdmember-prev"
	files := map[string][]byte{}
	for name, from := range map[string]string{
		"go.mod":                   filepath.Join(prev, "go.mod"),
		"go.sum":                   filepath.Join(prev, "go.sum"),
		"main.go":                  filepath.Join(src[memberPackage], "main.go"),
		"memberspec/memberspec.go": filepath.Join(src[memberspecPackage], "memberspec.go"),
	} {
		b, err := os.ReadFile(from)
		if err != nil {
			return "", fmt.Errorf("cluster: previous etcd member: %w", err)
		}
		files[name] = bytes.ReplaceAll(b, []byte(memberspecPackage), []byte(module+"/memberspec"))
	}
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum", "main.go", "memberspec/memberspec.go"} {
		fmt.Fprintf(h, "%s %d\n", name, len(files[name]))
		h.Write(files[name])
	}
	dir, err := binaryDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "etcdmember-"+PreviousEtcd+"-"+hex.EncodeToString(h.Sum(nil)[:12]))
	if _, err := os.Stat(path); err == nil {
		prevBuilt.path = path
		return path, nil
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("cluster: previous etcd member: %w", err)
	}
	defer os.RemoveAll(tmp)
	for name, b := range files {
		to := filepath.Join(tmp, "mod", name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return "", fmt.Errorf("cluster: previous etcd member: %w", err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			return "", fmt.Errorf("cluster: previous etcd member: %w", err)
		}
	}
	out := filepath.Join(tmp, "etcdmember")
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "build", "-mod=readonly", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = filepath.Join(tmp, "mod")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cluster: build etcdmember against etcd %s: %w: %s", PreviousEtcd, err, bytes.TrimSpace(stderr.Bytes()))
	}
	if err := os.Rename(out, path); err != nil {
		return "", fmt.Errorf("cluster: previous etcd member: %w", err)
	}
	prevBuilt.path = path
	return path, nil
}

// goList returns the source directory of each package, as the go command
// run in the current directory resolves it.
func goList(ctx context.Context, pkgs ...string) (map[string]string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-f", "{{.ImportPath}} {{.Dir}}"}, pkgs...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("cluster: go list %s: %w: %s", strings.Join(pkgs, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	dirs := map[string]string{}
	for line := range strings.Lines(stdout.String()) {
		if pkg, dir, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			dirs[pkg] = dir
		}
	}
	return dirs, nil
}
