package cluster

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RootUser is the name of etcd's root user, which EnableAuth creates.
const RootUser = "root"

// User is an etcd user whose one role, named after the user, may read and
// write the keys under Prefix and nothing else: a tenant of a shared etcd.
type User struct {
	Name     string
	Password string
	// Prefix is the key prefix the user's role may read and write; empty
	// means every key.
	Prefix string
}

// EnableAuth creates the root user with rootPassword, then every user with
// its role, and turns authentication on. cli must be a client of the
// cluster without credentials, made before authentication was on; it is of
// no use afterwards. Clients of the users come from ClientAs.
func EnableAuth(ctx context.Context, cli *clientv3.Client, rootPassword string, users ...User) error {
	if rootPassword == "" {
		return fmt.Errorf("%w: the root user needs a password", ErrInvalidConfig)
	}
	if _, err := cli.UserAdd(ctx, RootUser, rootPassword); err != nil {
		return fmt.Errorf("cluster: add user %s: %w", RootUser, err)
	}
	if _, err := cli.UserGrantRole(ctx, RootUser, "root"); err != nil {
		return fmt.Errorf("cluster: grant role root: %w", err)
	}
	for _, u := range users {
		if u.Name == "" || u.Name == RootUser || u.Password == "" {
			return fmt.Errorf("%w: user %q needs a name other than %s and a password", ErrInvalidConfig, u.Name, RootUser)
		}
		if _, err := cli.RoleAdd(ctx, u.Name); err != nil {
			return fmt.Errorf("cluster: add role %s: %w", u.Name, err)
		}
		key, end := u.Prefix, clientv3.GetPrefixRangeEnd(u.Prefix)
		if u.Prefix == "" {
			key, end = "\x00", "\x00"
		}
		if _, err := cli.RoleGrantPermission(ctx, u.Name, key, end, clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
			return fmt.Errorf("cluster: grant %s the prefix %q: %w", u.Name, u.Prefix, err)
		}
		if _, err := cli.UserAdd(ctx, u.Name, u.Password); err != nil {
			return fmt.Errorf("cluster: add user %s: %w", u.Name, err)
		}
		if _, err := cli.UserGrantRole(ctx, u.Name, u.Name); err != nil {
			return fmt.Errorf("cluster: grant %s its role: %w", u.Name, err)
		}
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("cluster: enable auth: %w", err)
	}
	return nil
}

// ClientAs returns a new client connected to every member that
// authenticates as user with password; it fails if etcd refuses them. Close
// closes it if the caller has not.
func (c *Cluster) ClientAs(user, password string) (*clientv3.Client, error) {
	if user == "" || password == "" {
		return nil, fmt.Errorf("%w: a client with credentials needs a user and a password", ErrInvalidConfig)
	}
	cfg := ClientConfig(c.Endpoints())
	cfg.Username, cfg.Password = user, password
	return c.clientWith(cfg)
}
