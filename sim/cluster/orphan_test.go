//go:build unix

package cluster_test

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMembersDieWithParent kills (SIGKILL) a process that runs a cluster of
// process members, so that no Close or cleanup runs, and checks that the
// members die with it.
func TestMembersDieWithParent(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	fields := strings.Fields(line)
	require.Equal(t, "pids", fields[0], "helper: %s", line)
	var pids []int
	for _, f := range fields[1:] {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		require.False(t, processGone(pid), "member %d runs", pid)
		pids = append(pids, pid)
	}

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	killed := time.Now()
	for _, pid := range pids {
		require.Eventually(t, func() bool { return processGone(pid) }, 10*time.Second, 10*time.Millisecond,
			"member process %d outlived its parent", pid)
	}
	t.Logf("member processes gone %v after their parent was killed", time.Since(killed).Round(time.Millisecond))
}
