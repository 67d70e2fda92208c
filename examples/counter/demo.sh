#!/usr/bin/env bash
# demo.sh: the counter fleet in one command. Run it from the repository's
# root:
#
#	examples/counter/demo.sh
#
# It builds the counter, starts an etcd host and three counter processes on
# one SQLite file, sends increments with curl (one of them twice, with the
# same Idempotency-Key), shows where keys live, stops one process with
# SIGTERM (its partitions move in milliseconds) and starts it again, and
# stops everything. Everything lives in a temporary directory, printed at
# the start and kept for a look at the logs and the database.
set -euo pipefail

dir=$(mktemp -d /tmp/counter-demo.XXXXXX)
echo "== working in $dir"
trap 'echo "demo.sh: line $LINENO: \"$BASH_COMMAND\" failed (status $?); logs in $dir" >&2' ERR
go build -o "$dir/counter" ./examples/counter
go build -o "$dir/tenurectl" ./examples/tenurectl

etcd=127.0.0.1:23890
pids=()
stop_all() {
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_all EXIT

# fail says what went wrong, shows the end of node-$1's log, and exits.
fail() {
	echo "demo.sh: $2" >&2
	echo "-- the end of $dir/node-$1.log:" >&2
	tail -n 20 "$dir/node-$1.log" >&2 || true
	exit 1
}

# wait_ready waits until node-$1 (pid $2) answers /readyz with 200: it
# serves every partition the ring gives it. A busy machine may take a
# while; a process that exited, or 60s without readiness, fails the demo.
wait_ready() {
	local i=$1 pid=$2 answer=
	for _ in $(seq 300); do
		if answer=$(curl -sf "127.0.0.1:809$i/readyz" 2>/dev/null); then
			echo "   node-$i: $answer"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || fail "$i" "node-$i (pid $pid) exited before it was ready"
		sleep 0.2
	done
	answer=$(curl -s "127.0.0.1:809$i/readyz" 2>&1 || true)
	fail "$i" "node-$i is not ready after 60s; /readyz says: ${answer:-nothing}"
}

# The etcd host serves etcd to the others and is a counter node itself. It
# creates the fleet with 64 partitions; the others adopt the fleet's count
# (no --partitions), so they start once it is ready.
"$dir/counter" --id node-1 --listen 127.0.0.1:8091 --db "sqlite:$dir/counter.db" --ttl 2s --partitions 64 \
	--embedded-etcd "$dir/etcd" --embedded-etcd-listen $etcd --embedded-etcd-peer 127.0.0.1:23900 \
	2>"$dir/node-1.log" &
pids+=($!)
echo "== waiting until every node serves its partitions (/readyz)"
wait_ready 1 "${pids[0]}"
for i in 2 3; do
	"$dir/counter" --id "node-$i" --listen "127.0.0.1:809$i" --etcd "http://$etcd" --db "sqlite:$dir/counter.db" --ttl 2s \
		2>"$dir/node-$i.log" &
	pids+=($!)
done
for i in 1 2 3; do wait_ready "$i" "${pids[$((i - 1))]}"; done

# http prints the answer to a request (curl's arguments), or says what
# failed and exits.
http() {
	local out
	out=$(curl -sS --max-time 30 --fail-with-body "$@" 2>&1) || { echo "demo.sh: curl $*: $out" >&2; exit 1; }
	echo "$out"
}

echo "== increments, all sent to node-2 (it forwards keys it does not own, one hop)"
for k in apples pears plums; do
	for n in 1 2 3; do
		http -X POST -H "Idempotency-Key: $k-$n" "127.0.0.1:8092/counters/$k/incr" >/dev/null
	done
done
echo "   the same increment again (Idempotency-Key apples-3): the stored result, not a fourth increment"
again=$(http -X POST -H 'Idempotency-Key: apples-3' 127.0.0.1:8092/counters/apples/incr)
echo "   $again"
for k in apples pears plums; do
	value=$(http "127.0.0.1:8093/counters/$k")
	echo "   $value"
done

echo "== the fleet as an operator sees it"
"$dir/tenurectl" --endpoints "$etcd" --cluster counter status | sed 's/^/   /'
"$dir/tenurectl" --endpoints "$etcd" --cluster counter owner-of apples | sed 's/^/   /'

echo "== stopping node-3 (SIGTERM): its partitions move in milliseconds, then it starts again"
kill -TERM "${pids[2]}"
wait "${pids[2]}" && echo "   node-3 exited with status $?"
grep -h "left the fleet" "$dir/node-3.log" | sed 's/^/   /'
"$dir/counter" --id node-3 --listen 127.0.0.1:8093 --etcd "http://$etcd" --db "sqlite:$dir/counter.db" --ttl 2s \
	2>>"$dir/node-3.log" &
pids[2]=$!
wait_ready 3 "${pids[2]}"
http -X POST -H "Idempotency-Key: apples-4" 127.0.0.1:8093/counters/apples/incr | sed 's/^/   /'

echo "== /metrics of node-2, the owner of these keys (counter_* and tenure_fence_*)"
http 127.0.0.1:8092/metrics | grep -E '^(counter_(increments|commits|partitions|keys)|tenure_fence)' | sed 's/^/   /'

echo "== stopping everything, the etcd host last"
for i in 2 1; do
	kill -TERM "${pids[$i]}"
	wait "${pids[$i]}" && echo "   node-$((i + 1)) exited with status $?"
done
kill -TERM "${pids[0]}"
wait "${pids[0]}" && echo "   node-1 (the etcd host) exited with status $?"
trap - EXIT
echo "== logs and the database: $dir"
