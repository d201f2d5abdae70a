"""Cost model of the UCX backend's own algorithms, round by round.

Each algorithm is written as the rounds its schedule runs
(backends/ucx/algorithms/*.cc): in a round every rank sends and receives at
most one message per peer, and the round ends when its slowest message has
arrived and been reduced. A message of m bytes costs

    alpha + m * beta                    (m <= eager_max: eager, one copy)
    alpha + rndv + m * beta             (m >  eager_max: rendezvous)

and reducing m bytes costs m * gamma. UCX switches from eager to
rendezvous (a request-to-send, then a get by the receiver, then an ack)
above a size of its own choosing; on this machine the 2-rank data jump
between 8 and 16 KiB messages, so eager_max = 8 KiB and `rndv` is the
handshake's extra cost.

Oversubscription. With more ranks than free cores, a rank that waits for a
peer which is not running spins (busy_poll_us), yields, and the peer gets a
core only when the scheduler next switches: every round then pays a
scheduling delay `q` on top of its message costs. The model charges q_P per
round for P ranks (q_2 = 0 on an idle 2-core machine; it is what load from
other processes adds), fitted to the 3- and 4-rank sweeps, and shares the
memory bandwidth: beta and gamma scale by max(1, P / cores).

Pipelined algorithms (ring, chain) cut each block into segments of at most
chunk_bytes and run one segment per round, so they pay many rounds for big
messages but keep every link busy.
"""
import math

CHUNK = 1 << 20        # Options::chunk_bytes default
EAGER_MAX = 8 << 10    # largest eager message seen in the 2-rank data


def lg(p):
    return math.ceil(math.log2(p)) if p > 1 else 0


CACHE_MAX = 4 << 20    # messages beyond this stream from memory, not cache


class Params:
    """alpha, beta: per message and per byte; gamma: per reduced byte;
    rndv: extra per rendezvous message in an exchange round, rndv_oneway in
    a one-way send (the sender waits for the receiver's get); beta_far: per
    byte of a message beyond CACHE_MAX; q: {P: scheduling delay per
    exchange round}."""

    def __init__(self, alpha, beta, gamma, rndv, rndv_oneway=None, beta_far=None, q=None,
                 cores=2, eager_max=EAGER_MAX, chunk=CHUNK):
        self.alpha, self.beta, self.gamma, self.rndv = alpha, beta, gamma, rndv
        self.rndv_oneway = rndv if rndv_oneway is None else rndv_oneway
        self.beta_far = beta if beta_far is None else beta_far
        self.q = dict(q or {})  # world size -> seconds per round
        self.cores, self.eager_max, self.chunk = cores, eager_max, chunk

    def share(self, p):
        return max(1.0, p / self.cores)

    def msg(self, p, m, exchange=True, active=None):
        """One round whose largest message is m bytes, on p ranks, of which
        `active` (default all) take part. An exchange round (every rank
        waits for a peer that waits for it) pays the scheduling delay q_P
        times (active - 1) / (p - 1): the more ranks must run in the round,
        the more of them wait for a core. A one-way eager send (broadcast,
        reduce) pays none, since the sender goes on without the receiver;
        a rendezvous one pays it for its two ranks."""
        active = p if active is None else active
        near = min(m, CACHE_MAX)
        t = self.alpha + (near * self.beta + (m - near) * self.beta_far) * self.share(p)
        if m > self.eager_max:
            t += self.rndv if exchange else self.rndv_oneway
        if not exchange and m > self.eager_max:
            exchange, active = True, 2
        if exchange and p > 1:
            t += self.q.get(p, 0.0) * (active - 1) / (p - 1)
        return t

    def red(self, p, m):
        return m * self.gamma * self.share(p)


def segments(m, chunk):
    return max(1, math.ceil(m / chunk))


def pipelined(x, p, steps, block, reduce_steps=0):
    """steps rounds of `block` bytes, each cut into segments of chunk bytes."""
    seg = min(block, x.chunk)
    k = segments(block, x.chunk)
    return steps * k * x.msg(p, seg) + reduce_steps * x.red(p, block)


# ---- allreduce (n: vector bytes) ----
def allreduce_rd(x, p, n):
    # Non-powers of two fold the first 2(p - k) ranks in pairs, run
    # recursive doubling on k ranks, and unfold: the fold rounds involve
    # 2(p - k) ranks, the others k.
    k = 1 << int(math.log2(p))
    t = lg(k) * (x.msg(p, n, active=k) + x.red(p, n))
    if k != p:
        t += 2 * x.msg(p, n, active=2 * (p - k)) + x.red(p, n)
    return t


def allreduce_ring(x, p, n):
    return pipelined(x, p, 2 * (p - 1), n / p, reduce_steps=p - 1)


# ---- broadcast / reduce (n: message bytes) ----
def broadcast_binomial(x, p, n):
    return lg(p) * x.msg(p, n, exchange=False)


def broadcast_chain(x, p, n):
    seg = min(n, x.chunk)
    return (segments(n, x.chunk) + p - 2) * x.msg(p, seg, exchange=False)


def reduce_binomial(x, p, n):
    return lg(p) * (x.msg(p, n, exchange=False) + x.red(p, n))


def reduce_chain(x, p, n):
    seg = min(n, x.chunk)
    return (segments(n, x.chunk) + p - 2) * (x.msg(p, seg, exchange=False) + x.red(p, seg))


# ---- allgather / reduce_scatter (n: block bytes) ----
def allgather_bruck(x, p, n):
    t, d = 0.0, 1
    while d < p:
        t += x.msg(p, min(d, p - d) * n)
        d <<= 1
    return t + p * n * x.gamma  # the final rotation copies every block


def allgather_ring(x, p, n):
    return pipelined(x, p, p - 1, n)


def reduce_scatter_rd(x, p, n):
    return allreduce_rd(x, p, p * n)


def reduce_scatter_ring(x, p, n):
    return pipelined(x, p, p - 1, n, reduce_steps=p - 1)


# op -> (latency algorithm, bandwidth algorithm)
ALGORITHMS = {
    "allreduce": (allreduce_rd, allreduce_ring),
    "broadcast": (broadcast_binomial, broadcast_chain),
    "reduce": (reduce_binomial, reduce_chain),
    "allgather": (allgather_bruck, allgather_ring),
    "reduce_scatter": (reduce_scatter_rd, reduce_scatter_ring),
}


def predict(x, op, p, n, side):
    """Modelled seconds of `op` on p ranks, n threshold bytes, side 'small'
    (latency algorithm) or 'large'."""
    return ALGORITHMS[op][0 if side == "small" else 1](x, p, n)


def model_threshold(x, op, p, sizes):
    """The largest size in `sizes` up to which the latency algorithm is
    modelled no slower, by the same loss as the measured one."""
    import crossover
    times = {n: (predict(x, op, p, n, "small"), predict(x, op, p, n, "large")) for n in sizes}
    return crossover.best_threshold(times)[0]


# ---- calibration ----
def nelder_mead(f, x0, steps, iterations=600):
    """Minimises f over a few parameters (no scipy on a fresh machine)."""
    simplex = [list(x0)]
    for i, s in enumerate(steps):
        x = list(x0)
        x[i] += s
        simplex.append(x)
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = sorted(range(len(simplex)), key=values.__getitem__)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        centroid = [sum(c) / (len(simplex) - 1) for c in zip(*simplex[:-1])]
        worst = simplex[-1]
        reflect = [c + (c - w) for c, w in zip(centroid, worst)]
        fr = f(reflect)
        if fr < values[0]:
            expand = [c + 2 * (c - w) for c, w in zip(centroid, worst)]
            fe = f(expand)
            simplex[-1], values[-1] = (expand, fe) if fe < fr else (reflect, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflect, fr
        else:
            contract = [c + 0.5 * (w - c) for c, w in zip(centroid, worst)]
            fc = f(contract)
            if fc < values[-1]:
                simplex[-1], values[-1] = contract, fc
            else:
                best = simplex[0]
                simplex = [best] + [[b + 0.5 * (x - b) for b, x in zip(best, s)]
                                    for s in simplex[1:]]
                values = [values[0]] + [f(s) for s in simplex[1:]]
    i = min(range(len(simplex)), key=values.__getitem__)
    return simplex[i], values[i]


def points(rows, ranks=None):
    """(op, p, threshold bytes, side, seconds) of every sweep row."""
    import crossover
    out = []
    for r in rows:
        side = {"syncline-ucx/small": "small", "syncline-ucx/large": "large"}.get(r["system"])
        if side is None or r["op"] not in ALGORITHMS or (ranks and r["ranks"] not in ranks):
            continue
        n = crossover.threshold_bytes(r["op"], r["ranks"], r["bytes"])
        out.append((r["op"], r["ranks"], n, side, r["time_us"] * 1e-6))
    return out


def log_loss(x, pts):
    """Robust (Huber, 0.5 in ln) sum over points of the log error."""
    total = 0.0
    for op, p, n, side, t in pts:
        e = abs(math.log(predict(x, op, p, n, side) / t))
        total += e * e if e < 0.5 else 0.5 * (2 * e - 0.5)
    return total


def calibrate(rows, gamma, cores=2):
    """Fits alpha, beta, beta_far, rndv, rndv_oneway and q_2 to the 2-rank
    sweep (every op, both algorithms; gamma fixed from membw; q_2 > 0 means
    other load took CPU from the two ranks), then q_P for each P > 2 to
    that P's sweep with the rest fixed. Returns Params, or None without
    2-rank data."""
    two = points(rows, ranks=(2,))
    if not two:
        return None
    names = ["alpha", "beta", "beta_far", "rndv", "rndv_oneway", "q2"]
    start = [2e-6, 2e-10, 5e-10, 10e-6, 30e-6, 1e-6]

    def make(v):
        d = dict(zip(names, (math.exp(u) for u in v)))
        return Params(d["alpha"], d["beta"], gamma, d["rndv"], d["rndv_oneway"], d["beta_far"],
                      q={2: d["q2"]}, cores=cores)

    v, _ = nelder_mead(lambda v: log_loss(make(v), two), [math.log(s) for s in start],
                       [1.0] * len(start), iterations=1500)
    x = make(v)
    for p in sorted({pt[1] for pt in points(rows)} - {2}):
        pts = points(rows, ranks=(p,))

        def with_q(v, p=p, pts=pts):
            x.q[p] = math.exp(v[0])
            return log_loss(x, pts)

        vq, _ = nelder_mead(with_q, [math.log(10e-6)], [1.0], iterations=200)
        x.q[p] = math.exp(vq[0])
    return x
