package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server the bench started: its own process on a
// free loopback port, data in a temporary directory, no persistence.
type redisServer struct {
	cmd  *exec.Cmd
	dir  string
	addr string
	done chan struct{}
}

// startRedis starts redis-server (bin, or "redis-server" on PATH). It
// returns an error wrapping errSkip if there is none.
func startRedis(ctx context.Context, bin string) (*redisServer, error) {
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%w: %s not found (%v)", errSkip, bin, err)
	}
	dir, err := os.MkdirTemp("", "tenure-bench-redis-")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &redisServer{cmd: cmd, dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", port), done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	c := redis.NewClient(&redis.Options{Addr: s.addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := c.Ping(ctx).Err(); err == nil {
			return s, nil
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			s.close()
			return nil, fmt.Errorf("redis-server on %s did not answer: %w", s.addr, err)
		}
		select {
		case <-s.done:
			s.close()
			return nil, errors.New("redis-server exited at start")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *redisServer) close() {
	_ = s.cmd.Process.Kill()
	<-s.done
	_ = os.RemoveAll(s.dir)
}

// unlockScript deletes the lock only if it still holds the caller's token.
var unlockScript = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// redisLock takes the seeds' per-operation Redis lock on key: SET key token
// NX PX ttl, retried every retry (with jitter) until it succeeds or ctx
// ends. unlock is the Lua compare-and-delete.
func redisLock(ctx context.Context, c *redis.Client, key, token string, ttl, retry time.Duration, jitter func() time.Duration) (unlock func() error, err error) {
	for {
		ok, err := c.SetNX(ctx, key, token, ttl).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return func() error { return unlockScript.Run(ctx, c, []string{key}, token).Err() }, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(retry + jitter()):
		}
	}
}
