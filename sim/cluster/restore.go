package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"

	"github.com/tenure-go/tenure/sim/cluster/internal/memberspec"
)

// Restoring a cluster from a snapshot, as an operator does with etcd's own
// tools: SaveSnapshot saves one (what etcdctl snapshot save does),
// SnapshotRevision reads its revision with etcdutl snapshot status, and
// Restore stops nothing but replaces the data of every stopped member with
// the snapshot, restored by etcdutl snapshot restore (with the caller's
// flags, such as --bump-revision and --mark-compacted), and starts them:
// a new etcd cluster with the snapshot's data, on the same ports, so that
// every client handed out reconnects to it. Etcdutl builds etcdutl from
// etcd's module, at the version of the etcd server this module requires.

// etcdutlPackage is etcd's etcdutl command: a tool of this module (go.mod),
// so that its version is the etcd server's.
const etcdutlPackage = "go.etcd.io/etcd/etcdutl/v3"

// builtEtcdutl is the etcdutl binary built by this process.
var builtEtcdutl cachedBinary

// Etcdutl returns the path of an etcdutl binary built from etcd's module at
// the version this module requires, building it on first use: go build in
// the current directory, as the member binary is built (memberBinary),
// into the user's cache directory under its content hash.
func Etcdutl(ctx context.Context) (string, error) {
	return builtEtcdutl.build(ctx, "etcdutl", etcdutlPackage, "")
}

// SaveSnapshot saves a snapshot of the cluster's data from its leader to
// path, as etcdctl snapshot save does, and syncs it to disk.
func (c *Cluster) SaveSnapshot(ctx context.Context, path string) error {
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		return err
	}
	cli, err := c.MemberClient(leader)
	if err != nil {
		return err
	}
	defer cli.Close()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("cluster: snapshot: %w", err)
	}
	defer rc.Close()
	part := path + ".part"
	f, err := os.Create(part)
	if err != nil {
		return fmt.Errorf("cluster: snapshot: %w", err)
	}
	_, err = io.Copy(f, rc)
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(part, path)
	}
	if err != nil {
		_ = os.Remove(part)
		return fmt.Errorf("cluster: snapshot to %s: %w", path, err)
	}
	return nil
}

// SnapshotRevision returns the revision of the snapshot at path, as
// etcdutl (the binary at etcdutl) reads it: etcdutl snapshot status -w json.
func SnapshotRevision(ctx context.Context, etcdutl, path string) (int64, error) {
	out, err := exec.CommandContext(ctx, etcdutl, "snapshot", "status", path, "-w", "json").Output()
	if err != nil {
		return 0, fmt.Errorf("cluster: etcdutl snapshot status %s: %w", path, exitDetail(err))
	}
	var st struct {
		Revision int64 `json:"revision"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return 0, fmt.Errorf("cluster: etcdutl snapshot status %s: %w: %q", path, err, out)
	}
	return st.Revision, nil
}

// Restore restores the snapshot at path into every member, with etcdutl
// (the binary at etcdutl) snapshot restore and flags (such as
// "--bump-revision", "N", "--mark-compacted"), and starts the members
// again on their ports and names: a new etcd cluster that holds the
// snapshot's data. Every member must be stopped (StopMember, KillMember);
// their data directories are replaced. Restore returns once every member
// serves and a leader is elected.
func (c *Cluster) Restore(ctx context.Context, etcdutl, path string, flags ...string) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	for _, m := range c.members {
		if m.state != MemberStopped {
			c.mu.Unlock()
			return stateError("restore", m)
		}
	}
	members := append([]*member(nil), c.members...)
	c.mu.Unlock()
	for _, m := range members {
		if err := os.RemoveAll(m.spec.Dir); err != nil {
			return fmt.Errorf("cluster: restore %s: %w", m.spec.Name, err)
		}
		args := append([]string{"snapshot", "restore", path,
			"--data-dir", m.spec.Dir, "--name", m.spec.Name,
			"--initial-cluster", m.spec.InitialCluster,
			"--initial-advertise-peer-urls", m.spec.PeerURL.String(),
			"--initial-cluster-token", memberspec.ClusterToken,
		}, flags...)
		if out, err := exec.CommandContext(ctx, etcdutl, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("cluster: restore %s: etcdutl %v: %w: %s", m.spec.Name, args, err, bytes.TrimSpace(out))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	errs := make([]error, len(members))
	runs := make([]run, len(members))
	for i, m := range members {
		runs[i], errs[i] = c.launch(ctx, m)
	}
	var wg sync.WaitGroup
	for i, m := range members {
		if runs[i] != nil {
			wg.Go(func() { errs[i] = c.ready(ctx, m, runs[i]) })
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	_, err := c.WaitLeader(ctx)
	return err
}

// exitDetail adds a command's standard error to the error of its exit.
func exitDetail(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err
}
