"""The profile as a dptwin model file: the library schema of scenarios/models/*.yaml
(schema_version 1) with the measured costs it allows: a `measured` block (device,
torch version, dtype, batch, optimizer and step times) and per layer the forward
and backward seconds of the measured batch."""
import os


def _q(s):
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _num(x):
    if isinstance(x, int) or float(x).is_integer():
        return str(int(x))
    return repr(float(x))


def _layer_parameters(layers):
    """Each layer's own parameters (local name, tensor), registration order; a tensor
    shared with an earlier layer (weight tying) belongs to the first one only."""
    seen = set()
    out = []
    for layer in layers:
        own = []
        for local, p in layer.module.named_parameters(recurse=False):
            if id(p) not in seen:
                seen.add(id(p))
                own.append((local, p))
        out.append(own)
    return out


def to_yaml(prof):
    batch = prof.batch
    per_layer = _layer_parameters(prof.layers)
    rows = []
    prev_features = max(1, prof.input_numel // batch)
    for layer, params in zip(prof.layers, per_layer):
        features = layer.output_numel // batch if layer.ran and layer.output_numel >= batch else prev_features
        features = max(1, features)
        prev_features = features
        rows.append(dict(
            name=layer.name, type=layer.type, params=params,
            flops=layer.flops / batch,
            acts=int(round(layer.saved_bytes / prof.element_bytes / batch)),
            out=features,
            fwd=layer.forward_s_median, bwd=layer.backward_s_median))
    total_params = sum(p.numel() for r in rows for _, p in r["params"])
    assert total_params == prof.parameter_count, (total_params, prof.parameter_count)
    out = ["# Written by dptwin_profile: measured on one device; dptwin uses the measured times as they are",
           "# on that device kind and FLOPs and bytes elsewhere.",
           "schema_version: 1",
           f"name: {_q(prof.name)}",
           f"sample: {_q('one sample of the profiled batch (dim 0 of the inputs)')}",
           f"input_features: {max(1, prof.input_numel // batch)}",
           "sources:",
           "  - " + _q(f"dptwin_profile on {prof.device}, torch {prof.torch_version}, {prof.dtype}, batch {batch}, "
                      f"median of {prof.steps} steps after {prof.warmup} warm-up"),
           "  - " + _q("FLOPs counted for linear, convolutions and matrix products only; activations: bytes saved "
                      "for backward (saved_tensors_hooks) in elements of the model's dtype"),
           "totals:  # checked on load against the sum over layers",
           f"  parameters: {total_params}",
           f"  forward_flops_per_sample: {_num(sum(r['flops'] for r in rows))}",
           f"  activation_elements_per_sample: {sum(r['acts'] for r in rows)}",
           "measured:",
           f"  device: {_q(prof.device)}",
           f"  device_kind: {prof.device_kind}",
           f"  gpu_model: {_q(prof.gpu_model)}" if prof.gpu_model else None,
           f"  torch: {_q(prof.torch_version)}",
           f"  dtype: {prof.dtype}",
           f"  batch: {batch}",
           f"  threads: {prof.threads}" if prof.threads else None,
           f"  optimizer: {prof.optimizer}",
           f"  steps: {prof.steps}",
           f"  warmup_steps: {prof.warmup}",
           f"  step_s: {prof.step_s!r}",
           f"  forward_s: {prof.forward_s!r}",
           f"  backward_s: {prof.backward_s!r}",
           f"  optimizer_step_s: {prof.optimizer_step_s!r}",
           f"  frozen_parameters: {prof.frozen_count}",
           f"  buffer_elements: {prof.buffer_count}",
           "layers:"]
    out = [line for line in out if line is not None]
    for r in rows:
        out += [f"  - name: {_q(r['name'])}",
                f"    type: {_q(r['type'])}",
                f"    forward_flops_per_sample: {_num(r['flops'])}",
                f"    activation_elements_per_sample: {r['acts']}",
                f"    output_features: {r['out']}",
                f"    forward_s: {r['fwd']!r}",
                f"    backward_s: {r['bwd']!r}"]
        if not r["params"]:
            out.append("    parameters: []")
            continue
        out.append("    parameters:")
        for local, p in r["params"]:
            # A 0-dim parameter is written as shape [1]: the same element count.
            frozen = "" if p.requires_grad else ", requires_grad: false"
            out.append(f"      - {{name: {_q(local)}, shape: [{', '.join(str(d) for d in (p.shape or [1]))}]{frozen}}}")
    return "\n".join(out) + "\n"


def write(prof, path):
    text = to_yaml(prof)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
