"""Every collective of the syncline c10d backend against a local oracle.

Run on N ranks by ranks.py (ctest: python.collectives.<backend>.<N>). Rank r's
input is a known function of r, so each rank computes every rank's input and
so the expected result itself. Covers each dtype torch uses that Syncline
supports, SUM/AVG/PRODUCT/MIN/MAX, async Work (wait, is_completed,
get_future), non-contiguous tensors, uneven alltoall splits and tagged
send/recv. Prints the number of checks on rank 0.
"""
import sys
import warnings

import torch
import torch.distributed as dist

from ranks import init

warnings.filterwarnings("ignore", message=".*(private function|will be deprecated).*")

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool]
OPS = {"SUM": dist.ReduceOp.SUM, "AVG": dist.ReduceOp.AVG,
       "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN, "MAX": dist.ReduceOp.MAX}
N = 13  # elements per rank: odd, so nothing lines up by luck

rank, world = init()
checks = 0


def data(r, dtype, n=N, salt=0):
    """Rank r's input: small values, so sums and products stay exact."""
    v = (torch.arange(n, dtype=torch.int64) * 7 + r * 3 + salt) % 4 + 1
    if dtype == torch.bool:
        return (v + r) % 3 == 0
    return v.to(dtype)


def oracle(xs, dtype, op):
    """`op` over the tensors `xs` (one per rank), computed in float64."""
    stacked = torch.stack([x.to(torch.float64) for x in xs])
    if op == "SUM":
        out = stacked.sum(0)
    elif op == "PRODUCT":
        out = stacked.prod(0)
    elif op == "MIN":
        out = stacked.min(0).values
    elif op == "MAX":
        out = stacked.max(0).values
    else:  # AVG: integer types truncate toward zero
        out = stacked.sum(0) / world
        if not dtype.is_floating_point:
            out = out.trunc()
    if dtype == torch.bool:
        return out != 0
    return out.to(dtype)


def reduced(dtype, op, n=N, salt=0):
    return oracle([data(r, dtype, n, salt) for r in range(world)], dtype, op)


def check(got, want, what):
    global checks
    checks += 1
    if got.dtype.is_floating_point:
        tol = {torch.float16: 1e-3, torch.bfloat16: 1e-2}.get(got.dtype, 1e-6)
        ok = torch.allclose(got.to(torch.float64), want.to(torch.float64), rtol=tol, atol=tol)
    else:
        ok = torch.equal(got, want)
    if not ok:
        sys.exit(f"rank {rank}: {what}: got {got.tolist()}, want {want.tolist()}")


def supported(dtype, op):
    return not (dtype == torch.bool and op == "AVG")


for dtype in DTYPES:
    name = str(dtype).replace("torch.", "")
    for op_name, op in OPS.items():
        if not supported(dtype, op_name):
            continue
        t = data(rank, dtype)
        dist.all_reduce(t, op=op)
        check(t, reduced(dtype, op_name), f"all_reduce {op_name} {name}")
        # reduce: only the root's result is defined
        t = data(rank, dtype)
        dist.reduce(t, dst=world - 1, op=op)
        if rank == world - 1:
            check(t, reduced(dtype, op_name), f"reduce {op_name} {name}")
        # reduce_scatter (list and base): block i of every rank's input
        inputs = [data(rank, dtype, N, salt=i) for i in range(world)]
        out = torch.empty(N, dtype=dtype)
        dist.reduce_scatter(out, inputs, op=op)
        want = reduced(dtype, op_name, salt=rank)
        check(out, want, f"reduce_scatter {op_name} {name}")
        out2 = torch.empty(N, dtype=dtype)
        dist._reduce_scatter_base(out2, torch.cat(inputs), op=op)
        check(out2, want, f"_reduce_scatter_base {op_name} {name}")

    # Data movement.
    t = data(rank, dtype)
    dist.broadcast(t, src=world - 1)
    check(t, data(world - 1, dtype), f"broadcast {name}")
    outs = [torch.empty(N, dtype=dtype) for _ in range(world)]
    dist.all_gather(outs, data(rank, dtype))
    for r in range(world):
        check(outs[r], data(r, dtype), f"all_gather {name} block {r}")
    flat = torch.empty(world * N, dtype=dtype)
    dist._all_gather_base(flat, data(rank, dtype))
    check(flat, torch.cat([data(r, dtype) for r in range(world)]), f"_all_gather_base {name}")
    gathered = [torch.empty(N, dtype=dtype) for _ in range(world)] if rank == 0 else None
    dist.gather(data(rank, dtype), gathered, dst=0)
    if rank == 0:
        for r in range(world):
            check(gathered[r], data(r, dtype), f"gather {name} block {r}")
    out = torch.empty(N, dtype=dtype)
    root = world - 1
    dist.scatter(out, [data(root, dtype, salt=i) for i in range(world)] if rank == root else None,
                 src=root)
    check(out, data(root, dtype, salt=rank), f"scatter {name}")
    # alltoall, equal blocks: block j of rank i is data(i, salt=j)
    send = torch.cat([data(rank, dtype, salt=j) for j in range(world)])
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    check(recv, torch.cat([data(i, dtype, salt=rank) for i in range(world)]),
          f"all_to_all_single {name}")
    # alltoall with uneven splits: rank i sends i + j + 1 rows of 2 to rank j
    rows = lambda i, j: i + j + 1  # noqa: E731
    send = torch.cat([data(rank, dtype, 2 * rows(rank, j), salt=j).view(-1, 2)
                      for j in range(world)])
    recv = torch.empty(sum(rows(i, rank) for i in range(world)), 2, dtype=dtype)
    dist.all_to_all_single(recv, send, output_split_sizes=[rows(i, rank) for i in range(world)],
                           input_split_sizes=[rows(rank, j) for j in range(world)])
    check(recv, torch.cat([data(i, dtype, 2 * rows(i, rank), salt=rank).view(-1, 2)
                           for i in range(world)]), f"all_to_all_single uneven {name}")
    outs = [torch.empty(rows(i, rank), dtype=dtype) for i in range(world)]
    dist.all_to_all(outs, [data(rank, dtype, rows(rank, j), salt=j) for j in range(world)])
    for i in range(world):
        check(outs[i], data(i, dtype, rows(i, rank), salt=rank), f"all_to_all {name} from {i}")
    # send/recv around the ring, two tags in flight at once
    right, left = (rank + 1) % world, (rank - 1) % world
    got_a, got_b = torch.empty(N, dtype=dtype), torch.empty(N, dtype=dtype)
    reqs = [dist.isend(data(rank, dtype, salt=1), right, tag=1),
            dist.isend(data(rank, dtype, salt=2), right, tag=2),
            dist.irecv(got_b, left, tag=2), dist.irecv(got_a, left, tag=1)]
    for req in reqs:
        req.wait()
    check(got_a, data(left, dtype, salt=1), f"send/recv tag 1 {name}")
    check(got_b, data(left, dtype, salt=2), f"send/recv tag 2 {name}")

# Coalesced allreduce of tensors of several shapes.
ts = [data(rank, torch.float32, n).view(-1) for n in (1, 5, 16)]
dist.all_reduce_coalesced(ts, op=dist.ReduceOp.SUM)
for t, n in zip(ts, (1, 5, 16)):
    check(t, reduced(torch.float32, "SUM", n), f"all_reduce_coalesced {n}")

# Coalesced allgather: rank r's tensors land in output list r.
sizes = (3, 7, 1)
outs = [[torch.empty(n, dtype=torch.int64) for n in sizes] for _ in range(world)]
dist.all_gather_coalesced(outs, [data(rank, torch.int64, n) for n in sizes])
for r in range(world):
    for t, n in zip(outs[r], sizes):
        check(t, data(r, torch.int64, n), f"all_gather_coalesced from {r}, {n} elements")

# Non-contiguous tensors: a strided view is reduced and broadcast in place.
base = torch.zeros(N, 4, dtype=torch.float64)
base[:, 1] = data(rank, torch.float64)
view = base[:, 1]
dist.all_reduce(view)
check(base[:, 1], reduced(torch.float64, "SUM"), "all_reduce non-contiguous")
check(base[:, 0], torch.zeros(N, dtype=torch.float64), "all_reduce leaves the rest alone")

# Async Work: wait, is_completed, the Future's value, then() chaining.
t = data(rank, torch.float32)
work = dist.all_reduce(t, async_op=True)
fut = work.get_future()
chained = fut.then(lambda f: f.value()[0] * 2)
work.wait()
assert work.is_completed()
check(fut.wait()[0], reduced(torch.float32, "SUM"), "get_future value")
check(chained.wait(), reduced(torch.float32, "SUM") * 2, "future then()")
ws = [dist.all_reduce(data(rank, torch.int64, salt=k), async_op=True) for k in range(8)]
for w in ws:
    w.wait()
dist.barrier()

# all_gather into the chunks of one tensor (written in place, no staging),
# into chunks out of rank order, into chunks whose block `rank` is the input
# itself, and several staged all_gathers in flight at once (each must get its
# own staging buffer) of two dtypes.
flat = torch.full((world * N,), -1.0)
dist.all_gather(list(flat.chunk(world)), data(rank, torch.float32))
check(flat, torch.cat([data(r, torch.float32) for r in range(world)]), "all_gather into chunks")
flat = torch.full((world * N,), -1.0)
dist.all_gather(list(reversed(flat.chunk(world))), data(rank, torch.float32))
check(flat, torch.cat([data(r, torch.float32) for r in reversed(range(world))]),
      "all_gather into chunks out of order")
flat = torch.full((world * N,), -1.0)
chunks = list(flat.chunk(world))
chunks[rank].copy_(data(rank, torch.float32))
dist.all_gather(chunks, chunks[rank])
check(flat, torch.cat([data(r, torch.float32) for r in range(world)]),
      "all_gather whose input is its own output block")
pending = []
for k, dtype in enumerate([torch.float64, torch.int8, torch.float64, torch.int32]):
    outs = [torch.full((N + k,), -1, dtype=dtype) for _ in range(world)]
    pending.append((dist.all_gather(outs, data(rank, dtype, N + k, salt=k), async_op=True),
                    outs, dtype, k))
for w, outs, dtype, k in pending:
    w.wait()
    for r in range(world):
        check(outs[r], data(r, dtype, N + k, salt=k), f"all_gather {k} in flight, block {r}")

# Subgroups: the even ranks, over their own communicator.
evens = list(range(0, world, 2))
group = dist.new_group(evens)
if rank in evens:
    t = data(rank, torch.int32)
    dist.all_reduce(t, group=group)
    want = torch.stack([data(r, torch.int32) for r in evens]).sum(0).to(torch.int32)
    check(t, want, "all_reduce on the even ranks' subgroup")
dist.barrier()

if rank == 0:
    print(f"collectives over syncline ({world} ranks): {checks} checks passed", flush=True)
dist.destroy_process_group()
