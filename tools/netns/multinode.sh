#!/usr/bin/env bash
# Multi-node on one machine (issue 14): two network namespaces, strata-n0
# and strata-n1 ("nodes"), each with a veth (eth0, 10.77.0.1/24 and
# 10.77.0.2/24) whose peer is on a bridge in a third namespace, strata-br.
# Nothing is created or addressed in the root namespace. In namespace i it
# runs
#   launch --nnodes=2 --node_rank=i --nproc_per_node=2 \
#          --master_addr=10.77.0.1 --master_port=PORT -- TRAIN FLAGS...
# (GLOO_SOCKET_IFNAME=eth0, so ranks talk over the veth), waits for both
# launchers and removes everything on exit, failure or signal (and, first,
# leftovers of a crashed run). Needs root and iproute2 (`ip`; `tc` for
# --qdisc).
#
# Usage: tools/netns/multinode.sh [options] -- TRAIN [TRAIN FLAGS...]
#   --launch=PATH        the launcher (default bazel-bin/launch/launch)
#   --logs=DIR           node<i>.log files go here (required)
#   --port=P             rendezvous port (default 29577)
#   --qdisc="ARGS"       `tc qdisc add dev eth0 root ARGS` in both nodes, e.g.
#                        "netem rate 1gbit delay 1ms", or where the kernel
#                        has no netem "tbf rate 1gbit burst 128kb latency 50ms"
#   --cut_after_step=N   with --metrics: `ip link set eth0 down` in strata-n1
#                        once FILE has a record of step >= N
#   --metrics=FILE       metrics.jsonl of the run (rank 0 writes it)
#   --restore_after_s=S  with --cut_after_step: the outage lasts S seconds,
#                        then the link comes back up
#   --launch_flag=FLAG   one more launcher flag (e.g. --max_restarts=1);
#                        repeatable
#   --timeout_s=S        kill the launchers after S seconds (default 600)
#   --cleanup            only remove leftovers and exit
# Prints "link: bytes=<rx+tx of strata-n1's eth0> seconds=<wall>" (all of
# strata-n1's traffic crosses the link; node-local traffic stays on lo), with
# --cut_after_step also "link: launchers done <s> s after the cut", and exits
# with 0 if both launchers did, else with the first nonzero status.
set -euo pipefail

readonly NS_NODES=(strata-n0 strata-n1)
readonly NS_BRIDGE=strata-br
readonly ADDRS=(10.77.0.1 10.77.0.2)

launch=bazel-bin/launch/launch
logs=""
port=29577
qdisc=""
cut_after_step=""
metrics=""
timeout_s=600
restore_after_s=""
launch_flags=()
only_cleanup=0

die() {
  echo "multinode.sh: $*" >&2
  exit 2
}

while (($#)); do
  case "$1" in
    --launch=*) launch="${1#*=}" ;;
    --logs=*) logs="${1#*=}" ;;
    --port=*) port="${1#*=}" ;;
    --qdisc=*) qdisc="${1#*=}" ;;
    --cut_after_step=*) cut_after_step="${1#*=}" ;;
    --metrics=*) metrics="${1#*=}" ;;
    --timeout_s=*) timeout_s="${1#*=}" ;;
    --restore_after_s=*) restore_after_s="${1#*=}" ;;
    --launch_flag=*) launch_flags+=("${1#*=}") ;;
    --cleanup) only_cleanup=1 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (options come before '--' and the train binary)" ;;
  esac
  shift
done

pids=()

cleanup() {
  local pid
  for pid in "${pids[@]:-}"; do
    if [[ -n "${pid}" ]]; then kill -TERM "${pid}" 2>/dev/null || true; fi
  done
  for pid in "${pids[@]:-}"; do
    if [[ -n "${pid}" ]]; then wait "${pid}" 2>/dev/null || true; fi
  done
  # Deleting a namespace deletes the veths and the bridge in it.
  local ns
  for ns in "${NS_NODES[@]}" "${NS_BRIDGE}"; do
    if ip netns list | grep -qw "^${ns}"; then
      ip netns delete "${ns}" || echo "multinode.sh: could not delete namespace ${ns}" >&2
    fi
  done
}

# The namespace names are fixed: one run at a time on a machine, so that a
# run's "leftovers" cleanup never removes a live run's namespaces.
readonly LOCK=/tmp/strata-multinode.lock
exec 9>"${LOCK}"
flock -w 300 9 || die "another multinode.sh run has held ${LOCK} for 300 s"

if ((only_cleanup)); then
  cleanup
  exit 0
fi

(($# >= 1)) || die "no train binary after '--'"
[[ -n "${logs}" ]] || die "--logs=DIR is required"
[[ -x "${launch}" ]] || die "launcher '${launch}' is not an executable file"
[[ -z "${cut_after_step}" || -n "${metrics}" ]] || die "--cut_after_step needs --metrics"
command -v ip >/dev/null || die "'ip' (iproute2) is not installed"
[[ -z "${qdisc}" ]] || command -v tc >/dev/null || die "'tc' (iproute2) is not installed; --qdisc needs it"
mkdir -p "${logs}"

trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Leftovers of a previous (crashed) run.
cleanup

setup() {
  ip netns add "${NS_BRIDGE}" || die "ip netns add ${NS_BRIDGE} failed"
  ip -n "${NS_BRIDGE}" link add br0 type bridge || die "creating bridge br0 in ${NS_BRIDGE} failed"
  ip -n "${NS_BRIDGE}" link set lo up
  ip -n "${NS_BRIDGE}" link set br0 up
  local i ns
  for i in 0 1; do
    ns="${NS_NODES[i]}"
    ip netns add "${ns}" || die "ip netns add ${ns} failed"
    ip -n "${NS_BRIDGE}" link add "n${i}" type veth peer name eth0 netns "${ns}" ||
      die "creating veth n${i} (${NS_BRIDGE}) <-> eth0 (${ns}) failed"
    ip -n "${NS_BRIDGE}" link set "n${i}" master br0
    ip -n "${NS_BRIDGE}" link set "n${i}" up
    ip -n "${ns}" addr add "${ADDRS[i]}/24" dev eth0
    ip -n "${ns}" link set lo up
    ip -n "${ns}" link set eth0 up
    if [[ -n "${qdisc}" ]]; then
      # shellcheck disable=SC2086  # ARGS are tc's words.
      ip netns exec "${ns}" tc qdisc add dev eth0 root ${qdisc} ||
        die "tc qdisc add dev eth0 root ${qdisc} in ${ns} failed (is the qdisc in this kernel?)"
    fi
  done
  # The nodes must reach each other before the launchers start.
  # (no ping installed: a TCP connect to a closed port must be refused, i.e.
  # answered by node 0's kernel, within 5 s).
  local probe
  probe="$(ip netns exec "${NS_NODES[1]}" timeout 5 bash -c \
    "exec 3<>/dev/tcp/${ADDRS[0]}/${port}" 2>&1 || true)"
  [[ "${probe}" == *"refused"* ]] ||
    die "${NS_NODES[1]} cannot reach ${ADDRS[0]} over the bridge (${probe:-no answer in 5 s})"
}

link_bytes() {
  local d=/sys/class/net/eth0/statistics
  ip netns exec "${NS_NODES[1]}" sh -c "echo \$((\$(cat ${d}/rx_bytes) + \$(cat ${d}/tx_bytes)))"
}

# Reads the largest "step" in FILE (0 when none yet).
max_step() {
  [[ -f "$1" ]] || { echo 0; return; }
  awk 'match($0, /"step": *[0-9]+/) {
         s = substr($0, RSTART, RLENGTH); sub(/.*: */, "", s)
         if (s + 0 > m) m = s + 0
       }
       END { print m + 0 }' "$1"
}

setup
bytes_before="$(link_bytes)"
start_ns="$(date +%s%N)"
for i in 0 1; do
  ip netns exec "${NS_NODES[i]}" env GLOO_SOCKET_IFNAME=eth0 \
    timeout --kill-after=10 "${timeout_s}" \
    "${launch}" --nnodes=2 --node_rank="${i}" --nproc_per_node=2 \
    --master_addr="${ADDRS[0]}" --master_port="${port}" "${launch_flags[@]}" -- "$@" \
    >"${logs}/node${i}.log" 2>&1 &
  pids+=("$!")
done

if [[ -n "${cut_after_step}" ]]; then
  # Waits on the condition (a record of step >= N, or a launcher gone),
  # polling every 0.2 s, up to the run's own deadline.
  deadline=$((SECONDS + timeout_s))
  while (($(max_step "${metrics}") < cut_after_step)); do
    if ! kill -0 "${pids[0]}" 2>/dev/null || ! kill -0 "${pids[1]}" 2>/dev/null; then
      die "a launcher exited before step ${cut_after_step} (see ${logs}/node*.log)"
    fi
    ((SECONDS < deadline)) || die "no step ${cut_after_step} in ${metrics} within ${timeout_s} s"
    sleep 0.2
  done
  ip -n "${NS_NODES[1]}" link set eth0 down
  cut_ns="$(date +%s%N)"
  echo "link: cut (eth0 of ${NS_NODES[1]} down) after step $(max_step "${metrics}")"
  if [[ -n "${restore_after_s}" ]]; then
    # The outage's length (not a wait for anything): the link comes back.
    sleep "${restore_after_s}"
    ip -n "${NS_NODES[1]}" link set eth0 up
    echo "link: restored after ${restore_after_s} s"
  fi
fi

status=0
for i in 0 1; do
  rc=0
  wait "${pids[i]}" || rc=$?
  echo "node${i}: launcher exited with ${rc}"
  ((status != 0 || rc == 0)) || status="${rc}"
done
pids=()
end_ns="$(date +%s%N)"
bytes_after="$(link_bytes)"
awk -v b=$((bytes_after - bytes_before)) -v t=$((end_ns - start_ns)) \
  'BEGIN { printf "link: bytes=%d seconds=%.2f\n", b, t / 1e9 }'
if [[ -n "${cut_after_step}" ]]; then
  awk -v t=$((end_ns - cut_ns)) 'BEGIN { printf "link: launchers done %.2f s after the cut\n", t / 1e9 }'
fi
exit "${status}"
