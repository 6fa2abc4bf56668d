"""dptwin_profile against PyTorch itself (label oracle, run by ctest with Debian's
/usr/bin/python3 and torch 1.13): parameter names, shapes and counts as the model
registers them; FLOPs and saved activations of an MLP counted by hand; the
written file loads in the twin, which uses the measured times as they are on the
GPU kind they were measured on and FLOPs elsewhere; bad input is a clear error.

usage: profile_test.py DPTWIN_EXECUTABLE SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

DPTWIN, SOURCE = sys.argv[1], sys.argv[2]
PROFILE_DIR = os.path.join(SOURCE, "scenarios", "profile")
sys.path[:0] = [PROFILE_DIR, os.path.join(PROFILE_DIR, "examples")]

import torch  # noqa: E402
import yaml  # noqa: E402

import dptwin_profile  # noqa: E402
import models  # noqa: E402

torch.set_num_threads(1)


def profile_file(build, tmp, **kw):
    model, batch, loss_fn = build()
    prof = dptwin_profile.profile(model, batch, loss_fn, steps=2, warmup=1, **kw)
    path = os.path.join(tmp, build.__name__ + ".yaml")
    prof.write(path)
    with open(path) as fh:
        return model, prof, yaml.safe_load(fh), path


def file_parameters(doc):
    """(full name, shape, requires_grad) in file order."""
    return [(f"{layer['name']}.{p['name']}" if layer["name"] != "model" else p["name"], p["shape"],
             p.get("requires_grad", True))
            for layer in doc["layers"] for p in layer["parameters"]]


class Parameters(unittest.TestCase):
    # Invariant: the file's parameters are model.named_parameters() (registration
    # order, a tied tensor once) with their shapes, and totals.parameters is
    # sum(p.numel() for p in model.parameters()). Shown to fail on a planted bug:
    # _layer_parameters without the `seen` check writes the tied head twice.
    def check(self, build):
        with tempfile.TemporaryDirectory() as tmp:
            model, prof, doc, _ = profile_file(build, tmp)
        expected = [(n, list(p.shape) or [1], p.requires_grad) for n, p in model.named_parameters()]
        self.assertEqual(file_parameters(doc), expected)
        self.assertEqual(doc["totals"]["parameters"], sum(p.numel() for p in model.parameters()))
        return model, doc

    def test_mlp(self):
        self.check(models.mlp)

    def test_weight_tying_counts_the_shared_tensor_once(self):
        model, doc = self.check(models.tied_lm)
        self.assertIs(model.lm_head.weight, model.wte.weight)
        names = [n for n, _, _ in file_parameters(doc)]
        self.assertIn("wte.weight", names)
        self.assertNotIn("lm_head.weight", names)
        self.assertEqual(doc["totals"]["parameters"], 134_912)  # 512x64 + 32x64 + 2 blocks + ln_f, counted by hand
        self.assertEqual(2 * (4 * 64 + 64 * 192 + 192 + 64 * 64 + 64 + 64 * 256 + 256 + 256 * 64 + 64)
                         + 512 * 64 + 32 * 64 + 2 * 64, 134_912)

    def test_batchnorm_buffers_are_not_parameters(self):
        model, doc = self.check(models.cnn_bn)
        buffers = sum(b.numel() for b in model.buffers())
        self.assertEqual(buffers, 2 * 16 + 1 + 2 * 32 + 1)  # running mean and var, num_batches_tracked
        self.assertEqual(doc["measured"]["buffer_elements"], buffers)

    def test_frozen_parameters_are_counted_and_marked(self):
        model, doc = self.check(models.frozen)
        frozen = [n for n, _, grad in file_parameters(doc) if not grad]
        self.assertEqual(frozen, ["0.weight", "0.bias"])
        self.assertEqual(doc["measured"]["frozen_parameters"], 64 * 128 + 128)


class Costs(unittest.TestCase):
    def test_mlp_flops_and_saved_activations_counted_by_hand(self):
        with tempfile.TemporaryDirectory() as tmp:
            _, prof, doc, _ = profile_file(models.mlp, tmp)
        # Three Linear layers 64-256-256-10: 2 x in x out per sample plus the bias adds.
        self.assertEqual(doc["totals"]["forward_flops_per_sample"],
                         2 * (64 * 256 + 256 * 256 + 256 * 10) + 256 + 256 + 10)
        # Saved for backward: the input (64) and each ReLU output (256, 256), which is
        # also the next Linear's input and counts once.
        self.assertEqual(doc["totals"]["activation_elements_per_sample"], 64 + 256 + 256)
        m = doc["measured"]
        self.assertEqual((m["batch"], m["dtype"], m["device_kind"], m["torch"]), (32, "f32", "cpu", torch.__version__))
        for layer in doc["layers"]:
            self.assertGreater(layer["forward_s"], 0, layer["name"])
        # The layers' times add up to the measured forward (loss included) and backward.
        # (each layer the median over steps, scaled to the median step).
        self.assertAlmostEqual(sum(layer["forward_s"] for layer in doc["layers"]), m["forward_s"], delta=1e-9)
        self.assertAlmostEqual(sum(layer["backward_s"] for layer in doc["layers"]), m["backward_s"], delta=1e-9)
        self.assertGreater(m["optimizer_step_s"], 0)

    def test_torch_attention_modules_count_their_whole_attention(self):
        # Invariant: nn.MultiheadAttention (here inside nn.TransformerEncoderLayer) counts
        # its q, k, v and output projections and both attention products, although
        # F.multi_head_attention_forward calls them with the counting mode off. Shown to
        # fail on a planted bug: without the multi_head_attention_forward rule the
        # encoder counts only its feed-forward and head (0 for self_attn).
        with tempfile.TemporaryDirectory() as tmp:
            _, _, doc, _ = profile_file(models.encoder, tmp)
        seq, d, ff, classes = 16, 32, 64, 10  # models.encoder's defaults
        attention = 4 * (2 * seq * d * d + seq * d) + 2 * 2 * seq * seq * d  # 4 projections, q k^T, weights v
        feed_forward = 2 * seq * d * ff + seq * ff + 2 * seq * ff * d + seq * d
        head = 2 * d * classes + classes
        self.assertEqual(doc["totals"]["forward_flops_per_sample"], attention + feed_forward + head)
        by_name = {layer["name"]: layer for layer in doc["layers"]}
        self.assertEqual(by_name["layer.self_attn"]["forward_flops_per_sample"], attention)


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=300)


class Twin(unittest.TestCase):
    def predict_json(self, path, *extra):
        r = run(DPTWIN, "predict", "--hardware", "dgx-h100", "--model", path, "--strategy", "single", "--devices", "1",
                "--batch", "32", "--json", *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_cpu_profile_predicts_on_a_gpu_from_flops_and_says_so(self):
        with tempfile.TemporaryDirectory() as tmp:
            _, _, _, path = profile_file(models.mlp, tmp)
            shown = run(DPTWIN, "model", "show", path)
            self.assertEqual(shown.returncode, 0, shown.stderr)
            self.assertIn("measured:", shown.stdout)
            report = self.predict_json(path)
        self.assertTrue(any("do not apply" in w and "cpu" in w for w in report["warnings"]), report["warnings"])

    def test_profile_of_the_predicted_gpu_kind_is_used_as_measured(self):
        # Invariant: on the GPU kind of the profile, one device's compute is the sum of
        # the measured layer times (here a CPU profile declared as an H100's, so the
        # figures are known). Shown to fail on a planted bug: CostLayer ignoring measured_s.
        with tempfile.TemporaryDirectory() as tmp:
            _, _, doc, path = profile_file(models.mlp, tmp, gpu_model="H100-SXM5-80GB")
            report = self.predict_json(path)
        measured = sum(layer["forward_s"] + layer["backward_s"] for layer in doc["layers"])
        self.assertTrue(any("used as measured" in w for w in report["warnings"]), report["warnings"])
        compute = report["breakdown_s"]["compute"]
        self.assertGreaterEqual(compute, measured * (1 - 1e-9))
        self.assertLess(compute, measured * 1.01 + 1e-4)  # plus the loss kernels the twin charges itself


def profile_cli(target, out, *extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PROFILE_DIR, os.path.join(PROFILE_DIR, "examples")]))
    return subprocess.run([sys.executable, "-m", "dptwin_profile", target, "--steps", "1", "--warmup", "0",
                           "-o", out, *extra], capture_output=True, text=True, env=env, timeout=300)


class CommandLine(unittest.TestCase):
    def test_batch_and_optimizer_flags(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "cnn.yaml")
            r = profile_cli("models:cnn_bn", out, "--batch", "4", "--optimizer", "sgd", "--threads", "1")
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as fh:
                doc = yaml.safe_load(fh)
        self.assertEqual((doc["measured"]["batch"], doc["measured"]["optimizer"]), (4, "sgd"))
        self.assertEqual(doc["input_features"], 3 * 32 * 32)
        self.assertIn("cnn.yaml", r.stdout)

    def test_a_file_path_target_and_a_bad_target(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "m.yaml")
            path = os.path.join(PROFILE_DIR, "examples", "models.py")
            self.assertEqual(profile_cli(path + ":mlp", out).returncode, 0)
            r = profile_cli("models:no_such_fn", out)
            self.assertEqual(r.returncode, 2)
            self.assertIn("models has no function no_such_fn", r.stderr)
            r = profile_cli("models", out)
            self.assertEqual(r.returncode, 2)
            self.assertIn("not MODULE:FN", r.stderr)


class HookCost(unittest.TestCase):
    # Invariant: the profile's forward and backward are those of the model without the
    # profiler's hooks; the layers' times add up to them. Planted: each forward pre-hook
    # made to cost 20 ms (6 modules: 120 ms per hooked forward, the plain one well under
    # 1 ms); a profile whose totals came from the hooked steps reports over 120 ms.
    def test_the_hooks_own_cost_stays_out_of_the_profile(self):
        recorder = dptwin_profile.profiler._Recorder
        original = recorder._pre

        def slow_pre(self, m, args):
            time.sleep(0.02)
            return original(self, m, args)

        recorder._pre = slow_pre
        try:
            model, batch, loss_fn = models.mlp()
            prof = dptwin_profile.profile(model, batch, loss_fn, steps=3, warmup=1)
        finally:
            recorder._pre = original
        self.assertLess(prof.forward_s, 0.06)
        self.assertAlmostEqual(sum(layer.forward_s_median for layer in prof.layers), prof.forward_s, delta=1e-9)
        self.assertAlmostEqual(sum(layer.backward_s_median for layer in prof.layers), prof.backward_s, delta=1e-9)


class BadInput(unittest.TestCase):
    def cli(self, target):
        with tempfile.TemporaryDirectory() as tmp:
            return profile_cli(target, os.path.join(tmp, "out.yaml"))

    def expect_error(self, target, *phrases):
        r = self.cli(target)
        self.assertEqual(r.returncode, 2, r.stderr)
        for phrase in phrases:
            self.assertIn(phrase, r.stderr)

    def test_a_model_that_does_not_run(self):
        self.expect_error("models:broken", "does not run", "module '2' (Linear)", "mat1 and mat2")
        self.expect_error("models:bad_loss", "does not run", "the loss failed")

    def test_a_non_module(self):
        self.expect_error("models:not_a_module", "not a torch.nn.Module")

    def test_no_backward(self):
        self.expect_error("models:no_backward", "no backward", "frozen")
        self.expect_error("models:detached_loss", "no backward", "detached")

    def test_api_rejects_a_non_module(self):
        with self.assertRaisesRegex(dptwin_profile.ProfileError, "not a torch.nn.Module"):
            dptwin_profile.profile(lambda x: x, (torch.zeros(2, 2), torch.zeros(2)), torch.nn.MSELoss())

    def test_api_rejects_a_before_step_that_is_not_callable(self):
        model, batch, loss_fn = models.mlp()
        with self.assertRaisesRegex(dptwin_profile.ProfileError, "before_step is a int, not callable"):
            dptwin_profile.profile(model, batch, loss_fn, before_step=3)

    def test_before_step_runs_once_before_every_warm_up_and_timed_step(self):
        # Invariant: before_step (the closure test's barrier) is called once per warm-up and
        # timed step, each time before that step's forward: 2 warm-up + 3 timed steps with
        # hooks + 3 without = 8 calls, each followed by exactly one forward of the model.
        model, batch, loss_fn = models.mlp()
        log = []
        model.register_forward_pre_hook(lambda m, a: log.append("forward"))
        dptwin_profile.profile(model, batch, loss_fn, steps=3, warmup=2, before_step=lambda: log.append("before"))
        timed = log[log.index("before"):]  # the census step runs first, unannounced
        self.assertEqual(timed, ["before", "forward"] * 8)

    def test_unknown_config_family(self):
        with tempfile.TemporaryDirectory() as tmp:
            cfg = os.path.join(tmp, "config.json")
            with open(cfg, "w") as fh:
                json.dump({"model_type": "t5", "d_model": 512}, fh)
            r = run(DPTWIN, "model", "show", "hf:" + cfg)
        self.assertEqual(r.returncode, 2, r.stderr)
        for phrase in (cfg, "model_type", "'t5' is not a family"):
            self.assertIn(phrase, r.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
