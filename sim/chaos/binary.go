package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// workerPackage is the command that workers run.
const workerPackage = "github.com/tenure-go/tenure/sim/chaos/worker"

// buildWorker builds the worker command into dir with go build, from the
// module of the current directory (where go test and go run start), so
// that it comes from the same source and dependency versions as the
// runner. The go command's build cache makes a rebuild cheap.
func buildWorker(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "worker")
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, workerPackage)
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("chaos: build %s (set Config.WorkerBinary where no Go toolchain is at hand): %w: %s",
			workerPackage, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}
