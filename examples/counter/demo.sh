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
go build -o "$dir/counter" ./examples/counter
go build -o "$dir/tenurectl" ./examples/tenurectl

etcd=127.0.0.1:23890
pids=()
stop_all() {
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_all EXIT

# The etcd host serves etcd to the others and is a counter node itself.
"$dir/counter" --id node-1 --listen 127.0.0.1:8091 --db "sqlite:$dir/counter.db" --ttl 2s --partitions 64 \
	--embedded-etcd "$dir/etcd" --embedded-etcd-listen $etcd --embedded-etcd-peer 127.0.0.1:23900 \
	2>"$dir/node-1.log" &
pids+=($!)
sleep 1
for i in 2 3; do
	"$dir/counter" --id "node-$i" --listen "127.0.0.1:809$i" --etcd "http://$etcd" --db "sqlite:$dir/counter.db" --ttl 2s \
		2>"$dir/node-$i.log" &
	pids+=($!)
done

echo "== waiting until every node serves its partitions (/readyz)"
for i in 1 2 3; do
	for _ in $(seq 100); do curl -sf "127.0.0.1:809$i/readyz" >/dev/null && break; sleep 0.2; done
	echo "   node-$i: $(curl -s "127.0.0.1:809$i/readyz")"
done

echo "== increments, all sent to node-2 (it forwards keys it does not own, one hop)"
for k in apples pears plums; do
	for n in 1 2 3; do
		curl -s -X POST -H "Idempotency-Key: $k-$n" "127.0.0.1:8092/counters/$k/incr" >/dev/null
	done
done
echo "   the same increment again (Idempotency-Key apples-3): the stored result, not a fourth increment"
echo "   $(curl -s -X POST -H 'Idempotency-Key: apples-3' 127.0.0.1:8092/counters/apples/incr)"
for k in apples pears plums; do echo "   $(curl -s "127.0.0.1:8093/counters/$k")"; done

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
for _ in $(seq 100); do curl -sf 127.0.0.1:8093/readyz >/dev/null && break; sleep 0.2; done
echo "   node-3: $(curl -s 127.0.0.1:8093/readyz)"
curl -s -X POST -H "Idempotency-Key: apples-4" 127.0.0.1:8093/counters/apples/incr | sed 's/^/   /'

echo "== /metrics of node-2, the owner of these keys (counter_* and tenure_fence_*)"
curl -s 127.0.0.1:8092/metrics | grep -E '^(counter_(increments|commits|partitions|keys)|tenure_fence)' | sed 's/^/   /'

echo "== stopping everything, the etcd host last"
for i in 2 1; do
	kill -TERM "${pids[$i]}"
	wait "${pids[$i]}" && echo "   node-$((i + 1)) exited with status $?"
done
kill -TERM "${pids[0]}"
wait "${pids[0]}" && echo "   node-1 (the etcd host) exited with status $?"
trap - EXIT
echo "== logs and the database: $dir"
