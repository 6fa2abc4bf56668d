"""PyTorch DistributedDataParallel as an oracle (imported by torch_oracle.py).

All "ddp" jobs of one run share one set of processes: `world_size` ranks are
forked once (torch.multiprocessing, gloo backend on the CPU, rendezvous at
MASTER_ADDR=127.0.0.1 on a free port), and every rank runs every job in order.

A job ("kind": "ddp") gives:
  name, model (as torch_oracle.build_mlp), loss, reduction, steps, sgd options,
  world_size (the same for all ddp jobs of one run),
  comm_hook (optional): "none" or "fp16_compress" (default_hooks.fp16_compress_hook),
  tensors  <name>/param/<p>            the weights rank 0 starts from
           <name>/param_other/<p>      the weights every other rank starts from
                                       (DDP's construction broadcast overwrites them)
           <name>/x/step<s>/rank<r>, <name>/y/step<s>/rank<r>   each rank's local batch
Results:   <name>/rank<r>/step<s>/grad/<p>   rank r's gradient after step s's backward
           <name>/rank<r>/step<s>/loss       rank r's local loss
           <name>/rank<r>/param/<p>          rank r's parameters after the last step
"""
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

import torch_oracle


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_job(rank, job, tensors):
    name = job["name"]
    model = torch_oracle.build_mlp(job["model"])
    source = "/param/" if rank == 0 else "/param_other/"
    model.load_state_dict(torch_oracle.state_of(tensors, name + source), strict=True)
    ddp = DistributedDataParallel(model)  # CPU module: no device_ids; broadcasts rank 0's parameters
    hook = job.get("comm_hook", "none")
    if hook == "fp16_compress":  # gloo runs it on the CPU; bf16_compress_hook needs CUDA and NCCL
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif hook != "none":
        raise ValueError(f"job {name}: comm_hook {hook!r} is not one the oracle runs")
    s = job["sgd"]
    opt = torch.optim.SGD(ddp.parameters(), lr=s["lr"], momentum=s["momentum"], dampening=s["dampening"],
                          weight_decay=s["weight_decay"], nesterov=s["nesterov"])
    crit = torch_oracle.loss_fn(job)
    out = {}
    for step in range(job["steps"]):
        x = tensors[f"{name}/x/step{step}/rank{rank}"]
        y = tensors[f"{name}/y/step{step}/rank{rank}"]
        opt.zero_grad()
        loss = crit(ddp(x), y)
        loss.backward()
        out[f"{name}/rank{rank}/step{step}/loss"] = torch.tensor([loss.item()], dtype=torch.float64)
        for pname, p in model.named_parameters():
            out[f"{name}/rank{rank}/step{step}/grad/{pname}"] = p.grad.detach().clone()
        opt.step()
    for pname, p in model.named_parameters():
        out[f"{name}/rank{rank}/param/{pname}"] = p.detach().clone()
    return out


def _worker(rank, world_size, port, jobs, tensors, result_prefix):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    out = {}
    try:
        for job in jobs:
            out.update(_run_job(rank, job, tensors))
    finally:
        dist.destroy_process_group()
    torch_oracle.write_safetensors(f"{result_prefix}.rank{rank}", out)


def run_ddp_jobs(jobs, tensors, out, work_dir):
    """Runs every ddp job in one set of forked ranks; adds their results to `out`."""
    world_sizes = {job["world_size"] for job in jobs}
    if len(world_sizes) != 1:
        raise ValueError(f"ddp jobs of one run must share world_size, got {sorted(world_sizes)}")
    world_size = world_sizes.pop()
    result_prefix = os.path.join(work_dir, "ddp_results")
    # fork, not spawn: the ranks inherit the imported torch and the tensors (spawn
    # would re-import torch in each rank, about 2 s each). The free port can be taken
    # by another process between _free_port() and rank 0's bind (tests run in
    # parallel); only that failure is retried, with a new port.
    for attempt in range(3):
        try:
            mp.start_processes(_worker, args=(world_size, _free_port(), jobs, tensors, result_prefix),
                               nprocs=world_size, join=True, start_method="fork")
            break
        except mp.ProcessRaisedException as e:
            if "in use" not in str(e) or attempt == 2:
                raise
    for rank in range(world_size):
        path = f"{result_prefix}.rank{rank}"
        rank_out, _ = torch_oracle.read_safetensors(path)
        out.update(rank_out)
        os.unlink(path)
