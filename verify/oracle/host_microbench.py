"""Microbenchmarks of this host for the twin's host platform (gloo collectives on CPU
workers): the rates scenarios/hardware/host-cpu-gloo.yaml holds, each measured here
with one thread per process, never taken from a DDP or all-reduce result.

  /usr/bin/python3 verify/oracle/host_microbench.py            # prints YAML-ready figures

- tcp_bandwidth: two processes exchange 1 MiB float32 segments through gloo's own
  point-to-point transport (torch.distributed isend/irecv, backend gloo, loopback TCP),
  both directions at once as a ring step runs; bytes each way per second.
- tcp_bandwidth_by_buffer: the same exchange, but walking 1 MiB slice by slice through
  a buffer of B bytes (its first half sent, its second half received, as a ring walks the
  buffer it all-reduces) for B = 2 .. 64 MiB; bytes each way per second of the walk's
  median slice (the fastest walk of many).
  Over loopback both copies of every byte (into the socket, out of it) are CPU work, and
  they slow down once the buffer leaves the cache.
- core_share: the share of a process's core that gloo's transfer takes from compute on it:
  1 - (pace of a 256^3 GEMM loop while the same process exchanges 64 MiB with the other in
  the background) / (its pace alone); the median of 8 rounds. The transfer keeps its pace
  (over loopback the receive work runs in softirq, ahead of the scheduler's fair share).
- message_latency: ping-pong of one float32 through the same transport; half a round trip.
- reduce_bandwidth: summing a received 1 MiB float32 segment into the next 1 MiB slice of
  a 64 MiB output (torch.add, out=), as gloo's ring walks its buffer; output bytes per second.
- memory_bandwidth: copying 64 MiB float32 (bytes read + written per second).
- gemm_flops, gemm_flops_f64: a 512 x 512 x 512 matmul in float32 and float64, FLOPs per second.
- dispatch_cost: one tiny torch op (add of one element) from Python.
- corun_slowdown (--corun): the median 512^3 GEMM with two processes computing at once,
  over the same alone (1.0: the two cores are independent). Not a hardware field: it is
  why the closure test profiles a rank while a second process works (closure_ddp.py).
Each figure is the fastest of many calls, each timed alone (the least disturbed on a
shared machine)."""
import argparse
import os
import socket
import statistics
import threading
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SEGMENT_BYTES = 1024 * 1024  # gloo's kMaxSegmentSize (gloo/allreduce.h)
WALK_BUFFERS = [2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20]  # tcp_bandwidth_by_buffer's points


def walk_exchange_times(buffer, buffer_bytes, peer):
    """Seconds of each 1 MiB slice exchanged with the peer (both ways at once, gloo
    isend/irecv) while walking buffer[:buffer_bytes]: its first half sent, its second half
    received, as a ring walks the buffer it all-reduces."""
    seg = SEGMENT_BYTES // 4
    slices = max(1, buffer_bytes // 2 // SEGMENT_BYTES)
    half = slices * seg
    times = []
    for i in range(slices):
        t0 = time.perf_counter()
        s = dist.isend(buffer[i * seg:(i + 1) * seg], peer)
        r = dist.irecv(buffer[half + i * seg:half + (i + 1) * seg], peer)
        s.wait()
        r.wait()
        times.append(time.perf_counter() - t0)
    return times


def walk_exchange(buffer, buffer_bytes, peer):
    """The walk's median slice in seconds: a slice preempted by other work does not count."""
    return statistics.median(walk_exchange_times(buffer, buffer_bytes, peer))


def core_share(peer, rounds=8):
    """1 - GEMM pace during a background 64 MiB gloo exchange / its pace alone (median of rounds)."""
    m = torch.randn(256, 256)
    send, recv = torch.ones(64 * SEGMENT_BYTES // 4), torch.empty(64 * SEGMENT_BYTES // 4)
    shares = []
    for _ in range(rounds):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(100):
            torch.mm(m, m)
        alone = (time.perf_counter() - t0) / 100
        dist.barrier()
        done = threading.Event()

        def transfer():
            s = dist.isend(send, peer)
            r = dist.irecv(recv, peer)
            s.wait()
            r.wait()
            done.set()

        th = threading.Thread(target=transfer)
        th.start()
        t0, n = time.perf_counter(), 0
        while not done.is_set() and time.perf_counter() - t0 < 10:
            torch.mm(m, m)
            n += 1
        during = (time.perf_counter() - t0) / max(n, 1)
        th.join()
        shares.append(1 - alone / during)
    return statistics.median(shares)


def best(fn, rounds, reps):
    """Seconds of the least disturbed call of fn among rounds x reps calls, each timed alone
    (on a machine shared with other work the fastest call is the one closest to the cost)."""
    fastest = float("inf")
    for _ in range(rounds * reps):
        t0 = time.perf_counter()
        fn()
        fastest = min(fastest, time.perf_counter() - t0)
    return fastest


def _transport(rank, port, rounds, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    peer = 1 - rank
    seg = torch.ones(SEGMENT_BYTES // 4)
    got = torch.empty_like(seg)

    def exchange():
        s = dist.isend(seg, peer)
        r = dist.irecv(got, peer)
        s.wait()
        r.wait()

    one, one_back = torch.ones(1), torch.empty(1)

    def ping_pong():
        if rank == 0:
            dist.send(one, 1)
            dist.recv(one_back, 1)
        else:
            dist.recv(one_back, 0)
            dist.send(one, 0)

    for _ in range(20):
        exchange()
        ping_pong()
    dist.barrier()
    exchange_s = best(exchange, rounds, 50)
    dist.barrier()
    round_trip_s = best(ping_pong, rounds, 500)
    walk_buffer = torch.ones(max(WALK_BUFFERS) // 4)
    walk_s = {b: float("inf") for b in WALK_BUFFERS}
    for _ in range(rounds * 3):  # sizes interleaved: a busy spell falls on all of them alike
        for b in WALK_BUFFERS:
            dist.barrier()
            walk_s[b] = min(walk_s[b], walk_exchange(walk_buffer, b, peer))
    share = core_share(peer)
    if rank == 0:
        queue.put((SEGMENT_BYTES / exchange_s, round_trip_s / 2, {b: SEGMENT_BYTES / t for b, t in walk_s.items()},
                   share))
    dist.barrier()
    dist.destroy_process_group()


def transport_rates(rounds):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_transport, args=(r, port, rounds, queue)) for r in range(2)]
    for p in procs:
        p.start()
    result = queue.get(timeout=300)
    for p in procs:
        p.join()
    return result


def _gemm_median(queue, calls):
    torch.set_num_threads(1)
    m = torch.randn(512, 512)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        torch.mm(m, m)
        times.append(time.perf_counter() - t0)
    queue.put(sorted(times)[len(times) // 2])


def corun_slowdown(calls=300):
    """Median GEMM time with two processes computing at once over the same alone."""
    ctx = mp.get_context("spawn")
    medians = {}
    for k in (1, 2):
        queue = ctx.Queue()
        procs = [ctx.Process(target=_gemm_median, args=(queue, calls)) for _ in range(k)]
        for p in procs:
            p.start()
        medians[k] = max(queue.get(timeout=300) for _ in procs)
        for p in procs:
            p.join()
    return medians[2] / medians[1]


def local_rates(rounds):
    torch.set_num_threads(1)
    # As gloo's ring reduces: a received 1 MiB segment (cache-warm) summed into the next
    # 1 MiB slice of a 64 MiB output buffer (streamed from memory).
    seg = SEGMENT_BYTES // 4
    out, received = torch.ones(64 * seg), torch.ones(seg)
    slices = [out[i * seg:(i + 1) * seg] for i in range(64)]
    at = [0]

    def reduce_next():
        dst = slices[at[0] % 64]
        at[0] += 1
        torch.add(dst, received, out=dst)

    reduce_s = best(reduce_next, rounds, 64)
    src, dst = torch.ones(16 * 1024 * 1024), torch.empty(16 * 1024 * 1024)
    copy_s = best(lambda: dst.copy_(src), rounds, 5)
    m = torch.randn(512, 512)
    gemm_s = best(lambda: torch.mm(m, m), rounds, 5)
    m64 = m.double()
    gemm64_s = best(lambda: torch.mm(m64, m64), rounds, 5)
    tiny = torch.ones(1)
    dispatch_s = best(lambda: torch.add(tiny, tiny), rounds, 2000)
    return {"reduce_bandwidth": SEGMENT_BYTES / reduce_s, "memory_bandwidth": 2 * src.numel() * 4 / copy_s,
            "gemm_flops": 2 * 512 ** 3 / gemm_s,
            "gemm_flops_f64": 2 * 512 ** 3 / gemm64_s, "dispatch_cost": dispatch_s}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--corun", action="store_true", help="also measure corun_slowdown")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    tcp_bps, latency_s, walk_bps, share = transport_rates(args.rounds)
    local = local_rates(args.rounds)
    print(f"# torch {torch.__version__}, {os.cpu_count()} CPUs; load average before: {load_before:.2f}")
    print(f"tcp_bandwidth: {tcp_bps / 1e9:.3f} GB/s")
    print(f"message_latency: {latency_s * 1e6:.1f} us")
    print(f"reduce_bandwidth: {local['reduce_bandwidth'] / 1e9:.3f} GB/s")
    print("tcp_bandwidth_by_buffer:")
    for b, bps in walk_bps.items():
        print(f"  - {{buffer: {b >> 20} MiB, bandwidth: {bps / 1e9:.3f} GB/s}}")
    print(f"core_share: {share:.2f}")
    print(f"memory_bandwidth: {local['memory_bandwidth'] / 1e9:.3f} GB/s")
    print(f"gemm_flops: {local['gemm_flops'] / 1e9:.1f} GFLOPS")
    print(f"gemm_flops_f64: {local['gemm_flops_f64'] / 1e9:.1f} GFLOPS")
    print(f"dispatch_cost: {local['dispatch_cost'] * 1e6:.2f} us")
    if args.corun:
        print(f"corun_slowdown: {corun_slowdown():.2f}")
    print(f"# load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
