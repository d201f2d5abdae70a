#!/usr/bin/env bash
# Multi-host tests on one machine: three "hosts" in network namespaces that
# this script creates (and always removes), joined by a bridge, with the
# store on host 0. Addresses 10.213.0.1-3 exist only inside those namespaces.
#
# Usage: multihost.sh <build bin dir> <scenario> [backend]
#   scenario: allreduce | linkdown | iface | netem
# Exit 0 on success, 77 (ctest SKIP_RETURN_CODE) with the reason when the
# process lacks CAP_NET_ADMIN or the kernel lacks a feature, 1 on failure.
set -uo pipefail
BIN=$1
SCENARIO=$2
BACKEND=${3:-gloo}
TAG="sl$$"
NS=("${TAG}h0" "${TAG}h1" "${TAG}h2")
BR="${TAG}br"
LOG=$(mktemp -d /tmp/syncline-netns-XXXXXX)
PORT=$((20000 + $$ % 10000))

skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*"; for f in "$LOG"/*.log; do echo "--- $f"; cat "$f"; done; exit 1; }

cleanup() {
  for ns in "${NS[@]}" "$BR"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$LOG"
}
trap cleanup EXIT

ip netns add "$BR" 2>/dev/null || skip "cannot create network namespaces (needs CAP_NET_ADMIN)"
ip -n "$BR" link add br0 type bridge || skip "no bridge support in this kernel"
ip -n "$BR" link set br0 up
for i in 0 1 2; do
  ns=${NS[$i]}
  ip netns add "$ns"
  ip link add "${TAG}v$i" type veth peer name eth0 netns "$ns"
  ip link set "${TAG}v$i" netns "$BR"
  ip -n "$BR" link set "${TAG}v$i" master br0 up
  ip -n "$ns" addr add "10.213.0.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
done

# Runs the allreduce example as rank $1 in its namespace; extra env in $2.
start_rank() {
  local r=$1 extra=$2
  shift 2
  ip netns exec "${NS[$r]}" env RANK="$r" WORLD_SIZE=3 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
    MASTER_ADDR=10.213.0.1 MASTER_PORT="$PORT" SYNCLINE_BACKEND="$BACKEND" \
    SYNCLINE_TIMEOUT=${SYNCLINE_TIMEOUT:-10} UCX_TLS=tcp $extra \
    "$BIN/syncline-allreduce-example" "$@" > "$LOG/rank$r.log" 2>&1 &
  PIDS[$r]=$!
}

wait_all() {
  local rc=0
  for r in 0 1 2; do wait "${PIDS[$r]}" || rc=1; done
  return $rc
}

case "$SCENARIO" in
  allreduce)
    for r in 0 1 2; do start_rank "$r" "" --count 1000003 --iters 3; done
    wait_all || fail "allreduce across 3 namespaces failed"
    grep -q "OK" "$LOG/rank0.log" || fail "rank 0 did not report a correct result"
    echo "PASSED: 3-host allreduce over $BACKEND"
    ;;
  linkdown)
    export SYNCLINE_TIMEOUT=5
    for r in 0 1 2; do start_rank "$r" "" --count 4000000 --iters 100000; done
    sleep 3
    ip -n "${NS[2]}" link set eth0 down
    start=$(date +%s)
    for r in 0 1; do
      if wait "${PIDS[$r]}"; then fail "rank $r finished although host 2's link went down"; fi
    done
    took=$(( $(date +%s) - start ))
    kill -9 "${PIDS[2]}" 2>/dev/null
    [ "$took" -le 20 ] || fail "survivors took ${took}s to fail (timeout 5s)"
    for r in 0 1; do
      grep -Eq "allreduce #[0-9]+" "$LOG/rank$r.log" || fail "rank $r's error does not name the op and its sequence number"
    done
    echo "PASSED: link down -> survivors failed in ${took}s naming the op"
    ;;
  iface)
    # An explicit exclusion that leaves eth0 works...
    for r in 0 1 2; do start_rank "$r" "SYNCLINE_SOCKET_IFNAME=^lo,docker" --count 1000 --iters 1; done
    wait_all || fail "SYNCLINE_SOCKET_IFNAME=^lo,docker failed"
    # ...and asking for loopback in a multi-host job is refused, not obeyed.
    for r in 0 1 2; do start_rank "$r" "SYNCLINE_SOCKET_IFNAME=lo SYNCLINE_TIMEOUT=5" --count 1000 --iters 1; done
    if wait_all; then fail "a multi-host job bound to loopback"; fi
    grep -q "loopback is not usable in a multi-host job" "$LOG"/rank*.log || fail "no message about loopback"
    echo "PASSED: interface selection"
    ;;
  netem)
    ip netns exec "${NS[2]}" tc qdisc add dev eth0 root netem delay 20ms loss 2% 2>"$LOG/tc.err" ||
      skip "tc netem is unavailable here: $(cat "$LOG/tc.err")"
    for r in 0 1 2; do start_rank "$r" "" --count 1000003 --iters 5; done
    wait_all || fail "allreduce with delay and loss failed"
    echo "PASSED: correct results with 20ms delay and 2% loss"
    ;;
  *) echo "unknown scenario $SCENARIO"; exit 2 ;;
esac
