#!/usr/bin/env python3
"""Startup at cluster scale: what the rendezvous store carries, per rank and in all.

Counts (from the code, per rank):
  check-in, flat          5 requests (rank 0's record, claim, arrive, verdict;
                          rank 0 also reads the event list), ~100 bytes read
  check-in, node leader   4 + k requests per node of k ranks (one connection,
                          one waiter): syncline-run's launcher; its ranks then
                          only connect (SYNCLINE_NODE_CHECKED_IN=1)
  UCX bootstrap, eager    1 set + N-1 gets of a ~121-byte record (measured:
                          3,751 bytes for 31 records) -- before lazy connect
  UCX bootstrap, lazy     create: 5 requests + 2 gets (the hello's ring
                          neighbours); then one get per peer first talked
                          to: log2 N more for recursive doubling, 0 for rings
  Gloo (Debian 2022-05)   connectFullMesh: 1 set of the host name and 1 of
                          all N-1 pair addresses (136 bytes each:
                          sockaddr_storage + sequence number); r gets of the
                          lower ranks' host names (N(N-1)/2 in all, for a
                          local rank its tcp transport never uses) and N-1
                          gets of every other rank's whole blob, to extract
                          one address from each: (N-1)^2 * 136 bytes read
                          per rank, O(N^3) in all; N-1 sockets per rank.
                          Syncline's mesh (backends/gloo/mesh.h) makes the
                          same pairs without Gloo's rendezvous: the pairs to
                          ranks r +- 2^k (2 ceil(log2 N) at most) through the
                          store, a key per pair holding only its port and IP
                          (6 bytes for IPv4), then every other pair's address
                          over those pairs (Bruck's all-to-all: ceil(log2 N)
                          rounds of ~N/2 blocks of 23 bytes, over TCP, not
                          the store). Per rank O(log N) store requests; the
                          store holds O(N log N) keys. N-1 TCP connections
                          per rank are Gloo's full mesh. One key per rank,
                          or lazy connection, would need Gloo's 2023 single
                          listener per device (see mesh.h)
  NCCL unique id          1 get of 128 bytes (+2 adds); NCCL then bootstraps
                          its own ring of sockets and allgathers over it

Calibration (this machine, bench/store_scale): the store server's CPU time per
simulated rank in the flat check-in, divided by its requests plus one
connection, gives the server's cost per request; its wall time per rank
(least squares on T(N) = a + b N) gives the startup slope as measured with
clients and server sharing the machine. Bytes cost the server at an assumed
1 GB/s (one TCP stream; stated, not measured). Startup estimate (store-bound,
one server thread): N * requests * c_req + bytes / 1 GB/s + a few round trips.

Without --csv, the server's cost per request is the assumed C_REQ_ASSUMED
(stated in the output); the bytes do not depend on it.

Usage: store_scale_model.py [--csv bench/results/store_scale.csv] [--md out.md]
"""
import argparse
import csv
import math
import statistics

RECORD_UCX = 121        # bytes, measured (UcxBootstrapScale test output)
ADDR_GLOO = 136         # bytes, gloo::transport::tcp::Address::bytes()
ADDR_GLOO_PACKED = 6    # bytes, port + IPv4 address (backends/gloo/mesh.cc)
KEY_GLOO_PAIR = 29      # bytes, "comm0/plugin/gloo/p/<r>/<j>" at 10k ranks
BLOCK_GLOO = 23         # bytes, a block of the mesh's all-to-all
HOSTNAME = 16           # bytes, a host name Gloo's rendezvous exchanges
UID_NCCL = 128
CHECKIN_BYTES = 100     # rank 0's record + the verdict
STORE_BPS = 1e9         # assumed server throughput for large values
RTT_S = 100e-6          # assumed datacenter round trip
K = 8                   # ranks per node
C_REQ_ASSUMED = 5e-6    # server cost per request when no measurement is given


def load(path):
    rows = list(csv.DictReader(open(path)))
    by = {}
    for r in rows:
        if int(r["errors"]):
            continue
        key = (r["impl"], int(r["per_check_in"]))
        by.setdefault(key, {}).setdefault(int(r["ranks"]), []).append(r)
    return by


def median(rows, field):
    return statistics.median(float(r[field]) for r in rows)


def fit(points):
    """Least squares T = a + b N."""
    ns = sorted(points)
    xs, ys = ns, [points[n] for n in ns]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - b * mx, b


def gloo_store_peers(n):
    """Ranks r +- 2^k (mod n) other than r: the mesh's pairs through the store."""
    steps = [2 ** k for k in range(math.ceil(math.log2(n)))]
    return len(({s % n for s in steps} | {-s % n for s in steps}) - {0})


def per_rank(n):
    """(requests, bytes read) per rank, for each part of startup."""
    lg = math.log2(n)
    return {
        "check-in, flat": (5, CHECKIN_BYTES),
        "check-in, node leader (per rank)": ((4 + K) / K, CHECKIN_BYTES / K),
        "UCX bootstrap, eager (before)": (n, (n - 1) * RECORD_UCX),
        "UCX bootstrap, lazy: create (publish + hello)": (7, 2 * RECORD_UCX),
        "UCX lazy: + first small allreduce": (lg, lg * RECORD_UCX),
        "Gloo connectFullMesh, Gloo's own keys": (
            2 + (n - 1) / 2 + (n - 1),
            (n - 1) / 2 * HOSTNAME + (n - 1) ** 2 * ADDR_GLOO),
        "Gloo, Syncline's mesh (store for log N pairs)": (
            2 * gloo_store_peers(n), gloo_store_peers(n) * ADDR_GLOO_PACKED),
        "NCCL unique id": (3, UID_NCCL),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", help="bench/store_scale output; calibrates the cost per request")
    ap.add_argument("--md")
    a = ap.parse_args()
    out = []
    by = load(a.csv) if a.csv else {}
    flat = by.get(("syncline", 1), {})
    if flat:
        big = [n for n in flat if n >= 1024] or list(flat)
        cpu_rank = statistics.median(median(flat[n], "server_cpu_s") / n for n in big)
        c_req = cpu_rank / 6  # 5 requests + the connection
        out.append("## Calibration (bench/store_scale on this machine)\n")
        out.append("| series | slope b (us/rank, wall) | a (ms) | server CPU per rank (us) |")
        out.append("|---|---:|---:|---:|")
        for (impl, k), pts in sorted(by.items()):
            a0, b = fit({n: median(r, "total_s") for n, r in pts.items()})
            cpu = statistics.median(median(pts[n], "server_cpu_s") / n for n in pts)
            label = impl if k == 1 else "%s, node leaders of %d" % (impl, k)
            out.append("| %s | %.1f | %.1f | %.1f |" % (label, b * 1e6, a0 * 1e3, cpu * 1e6))
        out.append("\nServer cost per request c_req = %.2f us (flat check-in CPU per rank / 6).\n"
                   % (c_req * 1e6))
    else:
        c_req = C_REQ_ASSUMED
        out.append("No measurement given (--csv): c_req = %.1f us per request is assumed; "
                   "the bytes below do not depend on it.\n" % (c_req * 1e6))
    out.append("## Bootstrap through the store, per rank and in all, at 10k and 100k ranks\n")
    out.append("| part | N | requests/rank | bytes read/rank | total bytes | "
               "store time (s) |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for n in (10_000, 100_000):
        for part, (req, byts) in per_rank(n).items():
            total_bytes = byts * n
            t = n * req * c_req + total_bytes / STORE_BPS
            out.append("| %s | %d | %.1f | %s | %s | %s |" % (
                part, n, req, human(byts), human(total_bytes),
                "%.3g" % t if t < 1e6 else "%.1e (infeasible)" % t))
    for n in (10_000, 100_000):
        out.append("\nGloo through Syncline's mesh at %d ranks: %d pair keys a rank in the "
                   "store (%s held in all, key and value, %d + %d bytes a pair), and "
                   "%s a rank over TCP in the all-to-all (%d rounds)." % (
                       n, gloo_store_peers(n),
                       human(n * gloo_store_peers(n) * (KEY_GLOO_PAIR + ADDR_GLOO_PACKED)),
                       KEY_GLOO_PAIR, ADDR_GLOO_PACKED,
                       human(math.ceil(math.log2(n)) * n / 2 * BLOCK_GLOO),
                       math.ceil(math.log2(n))))
    out.append("\n## Startup estimate (check-in + UCX create, store-bound)\n")
    out.append("Flat: every rank connects (1), checks in (5) and creates its UCX "
               "communicator (7). Under syncline-run, node leaders of %d: one check-in "
               "per node (1 connection + 4 + %d requests), then each rank connects (1) and "
               "creates (7).\n" % (K, K))
    out.append("| N | flat (s) | node leaders of %d (s) | saved |" % K)
    out.append("|---:|---:|---:|---:|")
    for n in (1024, 4096, 10_000, 100_000):
        flat_t = n * (1 + 5 + 7) * c_req + 6 * RTT_S
        leader_t = (n / K) * (1 + 4 + K) * c_req + n * (1 + 7) * c_req + (6 + K) * RTT_S
        out.append("| %d | %.3f | %.3f | %.0f%% |" % (n, flat_t, leader_t,
                                                   100 * (1 - leader_t / flat_t)))
    # Leaders pay K claims in series (K round trips); flat pays server time.
    saved = 5 - (5 + K) / K
    crossover = K * RTT_S / (c_req * saved)
    out.append("\nCrossover: node leaders win once N * c_req * (5 - (5 + k)/k) exceeds "
               "the k claims' round trips, N > %.0f ranks (k = %d, RTT %.0f us, c_req %.1f "
               "us): any multi-node job.\n" % (crossover, K, RTT_S * 1e6, c_req * 1e6))
    text = "\n".join(out) + "\n"
    print(text)
    if a.md:
        open(a.md, "w").write(text)


def human(b):
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if b < 1000:
            return "%.3g %s" % (b, unit)
        b /= 1000
    return "%.3g EB" % b


if __name__ == "__main__":
    main()
