#!/usr/bin/env bash
# demo.sh: the scheduler's paused-leader demonstration in one command. Run it
# from the repository's root:
#
#	examples/scheduler/demo.sh
#
# It builds the scheduler, starts an etcd host (--embedded-etcd,
# --candidate=false) and three candidates on one SQLite file, waits for the
# leader to decide to close a period, pauses it with SIGSTOP for longer than
# its TTL, resumes it, shows that the database refused its late write, and
# stops everything with SIGTERM. Everything lives in a temporary directory,
# printed at the start and kept for a look at the logs.
set -euo pipefail

dir=$(mktemp -d /tmp/scheduler-demo.XXXXXX)
echo "== working in $dir"
trap 'echo "demo.sh: line $LINENO: \"$BASH_COMMAND\" failed (status $?); logs in $dir" >&2' ERR
go build -o "$dir/scheduler" ./examples/scheduler

etcd=127.0.0.1:23790
pids=()
stop_all() {
	for pid in "${pids[@]}"; do kill -CONT "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_all EXIT

# fail says what went wrong, shows the end of $1.log, and exits.
fail() {
	echo "demo.sh: $2" >&2
	echo "-- the end of $dir/$1.log:" >&2
	tail -n 20 "$dir/$1.log" >&2 || true
	exit 1
}

# wait_ready waits until process $1 (HTTP port $2, pid $3) answers /readyz
# with 200: a candidate with a live etcd session, or the etcd host. A busy
# machine may take a while; a process that exited, or 60s without
# readiness, fails the demo.
wait_ready() {
	local name=$1 port=$2 pid=$3 answer=
	for _ in $(seq 300); do
		if answer=$(curl -sf "127.0.0.1:$port/readyz" 2>/dev/null); then
			echo "   $name: $answer"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || fail "$name" "$name (pid $pid) exited before it was ready"
		sleep 0.2
	done
	answer=$(curl -s "127.0.0.1:$port/readyz" 2>&1 || true)
	fail "$name" "$name is not ready after 60s; /readyz says: ${answer:-nothing}"
}

"$dir/scheduler" --id etcd --candidate=false --listen 127.0.0.1:8090 \
	--embedded-etcd "$dir/etcd" --embedded-etcd-listen $etcd --embedded-etcd-peer 127.0.0.1:23800 \
	2>"$dir/etcd.log" &
pids+=($!)
echo "== waiting until the etcd host and every candidate are ready (/readyz)"
wait_ready etcd 8090 "${pids[0]}"

# A 2s period, a 2s lease, and a 400ms hold between deciding which period
# to close and writing it: the window the pause below lands in.
flags=(--etcd "http://$etcd" --db "sqlite:$dir/scheduler.db" --period 2s --ttl 2s --hold 400ms)
for i in 1 2 3; do
	"$dir/scheduler" --id "node-$i" --listen "127.0.0.1:809$i" "${flags[@]}" 2>"$dir/node-$i.log" &
	pids+=($!)
done
for i in 1 2 3; do wait_ready "node-$i" "809$i" "${pids[$i]}"; done

echo "== waiting for a leader"
leader=
for _ in $(seq 300); do
	for i in 1 2 3; do
		if curl -sf "127.0.0.1:809$i/readyz" 2>/dev/null | grep -q leader; then leader=$i; fi
	done
	[ -n "$leader" ] && break
	sleep 0.2
done
if [ -z "$leader" ]; then
	for i in 1 2 3; do echo "   node-$i: $(curl -s "127.0.0.1:809$i/readyz" 2>&1 || true)" >&2; done
	fail node-1 "no leader after 60s"
fi
pid=${pids[$leader]}
echo "node-$leader leads (pid $pid); letting it close a few periods"
sleep 5

echo "== pausing node-$leader (SIGSTOP) as soon as it has decided to close a period"
( tail -n0 -F "$dir/node-$leader.log" & echo $! >"$dir/tail.pid"; wait ) |
	timeout 60 grep -m1 "holding before the write" | sed "s/^/   /" ||
	echo "   (node-$leader logged no decision within 60s; pausing it anyway)"
kill -STOP "$pid"
kill "$(cat "$dir/tail.pid")" 2>/dev/null || true
sleep 4 # longer than the 2s TTL: the others elect a new leader, which catches up
for i in 1 2 3; do
	[ "$i" = "$leader" ] && continue
	grep -h "elected" "$dir/node-$i.log" | sed "s/^/   /" || true
done

echo "== resuming node-$leader (SIGCONT)"
kill -CONT "$pid"
sleep 2
grep -h "stale run rejected\|term ended" "$dir/node-$leader.log" | sed "s/^/   /" || true
echo "   $(curl -s "127.0.0.1:809$leader/metrics" | grep '^scheduler_stale_runs_rejected_total')"

echo "== periods closed, per node (each period once: see $dir/node-*.log)"
for i in 1 2 3; do
	echo "   node-$i: $(grep -c 'period closed' "$dir/node-$i.log" || true)"
done

echo "== stopping the leader (SIGTERM): it resigns, the next takes over in milliseconds"
for i in 1 2 3; do
	if curl -sf "127.0.0.1:809$i/readyz" 2>/dev/null | grep -q leader; then leader=$i; fi
done
kill -TERM "${pids[$leader]}"
wait "${pids[$leader]}" && echo "   node-$leader exited with status $?"
sleep 1
grep -h "term ended\|stopped" "$dir/node-$leader.log" | tail -n 2 | sed "s/^/   /"
grep -h "elected" "$dir"/node-*.log | sort | tail -n 1 | sed "s/^/   /"

echo "== stopping the others, the etcd host last"
for i in 1 2 3; do
	[ "$i" = "$leader" ] && continue
	kill -TERM "${pids[$i]}"
	wait "${pids[$i]}" && echo "   node-$i exited with status $?"
done
kill -TERM "${pids[0]}"
wait "${pids[0]}" && echo "   the etcd host exited with status $?"
trap - EXIT
echo "== logs and the database: $dir"
