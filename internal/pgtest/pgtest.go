// Package pgtest gives tests a real, throwaway PostgreSQL database.
//
// Open honours the environment first: if TENURE_PG_DSN is set, it connects
// there. Otherwise it starts a private server from the PostgreSQL binaries
// installed under /usr/lib/postgresql/<version>/bin (or the directory named
// by TENURE_PG_BIN): initdb into a temporary directory, then the server
// itself as a child process on a free loopback port with the socket in that
// directory. The server never outlives the test process: the kernel kills
// it when its parent dies (see internal/childproc), so a test binary killed
// by a timeout leaves no server behind. PostgreSQL refuses to run as root,
// so when the process runs as root the server runs as the postgres user.
//
// Either way Open creates a fresh database for the caller, so that concurrent
// test binaries sharing one server never see each other's tables. Close drops
// that database and, for a private server, stops it and removes its
// directory.
//
// If neither a DSN nor binaries are available, Open returns an error wrapping
// ErrUnavailable; tests skip on it unless TENURE_REQUIRE_PG is set (Check).
// ForTest does all of this for one test: a fresh database, closed when the
// test ends, on a private server of its own (about a second to start)
// unless TENURE_PG_DSN names one.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/internal/nilness"
)

// ErrUnavailable reports that no PostgreSQL server can be reached or
// started: TENURE_PG_DSN is unset and no binaries are installed.
var ErrUnavailable = errors.New("pgtest: PostgreSQL unavailable")

// ErrNilArgument reports a nil context given to Open, or Close called on a
// nil *DB.
var ErrNilArgument = errors.New("pgtest: nil argument")

// Environment variables read by Open and Required.
const (
	EnvDSN     = "TENURE_PG_DSN"
	EnvBin     = "TENURE_PG_BIN"
	EnvRequire = "TENURE_REQUIRE_PG"
)

// Required reports whether the environment demands PostgreSQL tests run
// (TENURE_REQUIRE_PG is set to a non-empty value other than "0").
func Required() bool {
	v := os.Getenv(EnvRequire)
	return v != "" && v != "0"
}

// DB is an open test database. Close releases it.
type DB struct {
	// DB is the connection pool to the test database (driver pgx).
	DB *sql.DB
	// DSN is the test database's URL (postgres://...), for programs under
	// test that take one.
	DSN string
	// Source says where the server came from, for log lines.
	Source string

	admin  *sql.DB
	dbName string
	server *server
}

// Open returns a fresh database on a server from TENURE_PG_DSN or on a
// private server started from the installed binaries.
func Open(ctx context.Context) (*DB, error) {
	if nilness.Is(ctx) {
		return nil, fmt.Errorf("%w: context", ErrNilArgument)
	}
	dsn := os.Getenv(EnvDSN)
	source := "TENURE_PG_DSN"
	var srv *server
	if dsn == "" {
		bin, err := findBin()
		if err != nil {
			return nil, err
		}
		srv, err = startServer(ctx, bin)
		if err != nil {
			return nil, err
		}
		dsn = srv.dsn
		source = "private server from " + bin
	}
	d, err := openFresh(ctx, dsn)
	if err != nil {
		if srv != nil {
			srv.stop()
		}
		return nil, err
	}
	d.server, d.Source = srv, source
	return d, nil
}

func openFresh(ctx context.Context, dsn string) (*DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgtest: parse DSN: %w", err)
	}
	admin := stdlib.OpenDB(*cfg)
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "tenure_test_" + hex.EncodeToString(suffix[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		_ = admin.Close()
		return nil, fmt.Errorf("pgtest: create database: %w", err)
	}
	cfg2 := cfg.Copy()
	cfg2.Database = name
	db := stdlib.OpenDB(*cfg2)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		_, _ = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name)
		_ = admin.Close()
		return nil, fmt.Errorf("pgtest: connect: %w", err)
	}
	return &DB{DB: db, DSN: withDatabase(dsn, name), admin: admin, dbName: name}, nil
}

// Close closes the pool, drops the database and stops a private server.
func (d *DB) Close() error {
	if d == nil || d.DB == nil {
		return fmt.Errorf("%w: *DB", ErrNilArgument)
	}
	err := d.DB.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, e := d.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+d.dbName+" WITH (FORCE)"); e != nil {
		err = errors.Join(err, fmt.Errorf("pgtest: drop database: %w", e))
	}
	err = errors.Join(err, d.admin.Close())
	if d.server != nil {
		d.server.stop()
	}
	return err
}

// findBin returns the newest installed PostgreSQL bin directory.
func findBin() (string, error) {
	if b := os.Getenv(EnvBin); b != "" {
		if !isExec(filepath.Join(b, "initdb")) || !isExec(filepath.Join(b, "postgres")) {
			return "", fmt.Errorf("%w: %s=%s holds no initdb and postgres", ErrUnavailable, EnvBin, b)
		}
		return b, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var ok []string
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			ok = append(ok, d)
		}
	}
	if len(ok) == 0 {
		return "", fmt.Errorf("%w: %s is unset and no initdb/postgres under /usr/lib/postgresql/*/bin (apt-get install postgresql)", ErrUnavailable, EnvDSN)
	}
	slices.SortFunc(ok, func(a, b string) int { return versionOf(a) - versionOf(b) })
	return ok[len(ok)-1], nil
}

func versionOf(bin string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return v
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

type server struct {
	bin  string
	dir  string
	dsn  string
	cred *syscall.Credential
	proc *childproc.Process
}

func startServer(ctx context.Context, bin string) (*server, error) {
	dir, err := os.MkdirTemp("", "tenure-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temp dir: %w", err)
	}
	s := &server{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("%w: running as root and no postgres user to run the server as: %v", ErrUnavailable, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: chown %s: %w", dir, err)
		}
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run(ctx, "initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %w: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	ready := make(chan struct{})
	var once sync.Once
	tail := &childproc.Tail{Size: 4 << 10}
	lines := &childproc.LineWriter{Line: func(l []byte) {
		_, _ = tail.Write(append(l, '\n'))
		if strings.Contains(string(l), "ready to accept connections") {
			once.Do(func() { close(ready) })
		}
	}}
	// autovacuum_naptime=1s: tests that update a few rows thousands of
	// times a second (the counter) leave dead row versions that slow every
	// read of those rows until a vacuum; with the default of a minute,
	// their latency steps whenever the vacuum comes, not with what they
	// measure.
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200",
		"-c", "autovacuum_naptime=1s")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = lines, lines
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	s.proc, err = childproc.Start(cmd, nil)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: start postgres: %w", err)
	}
	select {
	case <-ready:
	case <-s.proc.Exited():
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: postgres exited before it was ready (%v): %s", s.proc.Err(), tail)
	case <-ctx.Done():
		s.proc.Kill()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: postgres not ready: %w: %s", context.Cause(ctx), tail)
	}
	s.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return s, nil
}

func (s *server) run(ctx context.Context, prog string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, prog), args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// stop shuts the server down fast (SIGINT: roll back open transactions,
// disconnect clients), kills it if it has not exited within a minute, and
// removes its directory.
func (s *server) stop() {
	if s.proc.Signal(syscall.SIGINT) == nil {
		t := time.NewTimer(time.Minute)
		select {
		case <-s.proc.Exited():
		case <-t.C:
		}
		t.Stop()
	}
	s.proc.Kill()
	_ = os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// withDatabase returns dsn naming database name instead of its own: a URL
// with name as its path, or a keyword/value DSN with dbname appended.
func withDatabase(dsn, name string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		return u.String()
	}
	return dsn + " dbname=" + name
}
