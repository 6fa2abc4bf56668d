#!/usr/bin/env python3
"""Generates the model library (scenarios/models/*.yaml) from published
architecture hyperparameters.

Each model is a per-layer list in registration order: parameter tensor names
and shapes (as the reference implementation names them), forward FLOPs per
sample and activation elements saved for backward per sample. Run it from any
directory; it rewrites the YAML files beside itself and checks each model's
parameter count against the published figure.

Counting conventions (the same for every model, stated once here):
  * FLOPs: a multiply-add is 2 FLOPs. GEMM/conv FLOPs are exact from the shapes;
    element-wise work uses the per-element figures engine/kernels.cpp charges
    (ReLU 1, GELU 12, LayerNorm 8, softmax 5, BatchNorm 4, residual add 1).
  * Activations: the tensors PyTorch saves for backward in eager mode (no
    activation checkpointing, no fused/flash attention), each counted once
    (a tensor saved by two ops, e.g. a ReLU output that is the next conv's input,
    counts once). Dropout masks are 1 byte per element: counted as a quarter of
    an element (f32 equivalent). Transformers follow Korthikanti et al. 2022,
    "Reducing Activation Recomputation in Large Transformer Models", Sec. 4.1.
  * Memory-bound traffic: for each layer, the elements its memory-bound kernels
    (norms, activations, softmax chains, dropout, residual adds, pooling, layout
    copies, gradient accumulation) read plus write per sample, forward and backward,
    counted kernel by kernel as PyTorch's eager kernels run them (per-kernel pass
    counts at MB_* below; 1-byte masks count a quarter, int64 indices two). GEMM and
    convolution kernels' own reads and writes are not in it (they are charged with
    their FLOPs).
  * bmms: eager attention's batched matmuls per sample (count, m, n, k): QK^T and the
    scores times V for each head. Their FLOPs are among the layer's; the twin runs each
    as a kernel of its own that reads its operands and writes its product (backward: two
    kernels, the gradients of both operands), so the s x s scores' reads and writes are
    charged where they happen.
  * Autocast casts: for each layer, the elements bf16/f16 autocast casts between f32 and the
    low type in kernels of their own, per sample (forward; backward the casts' gradients,
    cast the other way): an f32 activation for each GEMM that takes it (autocast caches only
    leaf tensors' casts, so q, k and v each cast their f32 input), a softmax output cast
    back (HF's .type()/.to()), an f32 softmax output that meets a matmul, the image cast for
    the stem. The twin adds each weight's cast itself. Not casts: softmax and log_softmax
    (cross_entropy's first op on CUDA) take dtype=float32 and read the f16 input directly.
    Fused models (NVFuser) fold their activation casts into the neighbouring fused kernels.
  * conv_io: for each convolution layer, its convolutions' input plus output
    elements per sample: Tensor Core convolutions on NCHW tensors transpose them
    to NHWC and back (the twin charges that under a Tensor Core compute type).
    convs: the same convolutions one by one (forward FLOPs, input plus output elements),
    each a cuDNN kernel of its own with its own roofline (a 1x1 convolution's FLOPs per
    byte are a fifth of a 3x3's: on Tensor Cores it can be memory-bound).
  * A sample is one image (ResNet-50) or one full-length sequence (transformers).
    Token ids enter as one feature per position.
"""
import os
import sys

SCHEMA_VERSION = 1
HERE = os.path.dirname(os.path.abspath(__file__))

# Element-wise FLOPs per element, as engine/kernels.cpp charges them.
RELU, GELU, LAYERNORM, SOFTMAX, BATCHNORM, ADD = 1, 12, 8, 5, 4, 1

# Elements read plus written per element of the tensor, per memory-bound kernel
# (forward, backward), as PyTorch 1.x eager runs them:
#   BatchNorm2d training (cuDNN): forward reads x for the statistics, then reads x and
#     writes y (3); backward reads x and dy for the reductions, then reads both and
#     writes dx (5).
#   ReLU(inplace): reads and writes (2); threshold_backward reads dy and y, writes dx (3).
#   add (a + b): reads two, writes one (3); backward: none (the gradient is passed on).
#   Gradient accumulation where a tensor feeds two ops (autograd sums the two: 3).
#   LayerNorm: forward reads x for the moments, then reads x and writes y (3); backward
#     reads dy and x for dx and again for the weight and bias gradients, writes dx (5).
#   Dropout (training): reads x, writes y and a 1-byte mask (2.25); backward reads dy and
#     the mask, writes dx (2.25).
#   Scalar scale, mask fill (torch.where / + mask): 2 forward, 2 backward.
#   Softmax over the last dimension: reads and writes (2); backward reads dy and y,
#     writes dx (3).
#   A one-kernel GELU (F.gelu): 2 forward, 3 backward. GPT-2's "gelu_new" in Hugging Face
#     transformers is eager Python, 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))):
#     eight kernels (pow, mul, add, mul, tanh, add, mul, mul: 18 forward) and their
#     autograd backward (mul backwards 6 or 2, pow 7, tanh 3, two accumulations of x's
#     gradient 6: 28).
#   A permute made contiguous (attention's head split and merge): reads and writes (2),
#     the same backward.
#   Bias gradient of a Linear (sum of dy over rows): reads dy (1).
MB_BN = (3, 5)
MB_RELU = (2, 3)
MB_ADD = (3, 0)
MB_ACCUMULATE = (0, 3)
MB_LAYERNORM = (3, 5)
MB_DROPOUT = (2.25, 2.25)
MB_SCALE = (2, 2)
MB_SOFTMAX = (2, 3)
MB_GELU_FUSED = (2, 3)
MB_GELU_EAGER = (18, 28)
MB_COPY = (2, 2)
MB_BIAS_GRAD = (0, 1)
# Llama in Hugging Face transformers (eager, no fused kernels):
#   LlamaRMSNorm: x.pow(2) (2), .mean(-1) (1), x * rsqrt(var + eps) (2), weight * x (2): 7
#     forward; backward: the two muls' input and weight/rsqrt gradients (2 + 3 + 1, 2 + 3 + 1),
#     the mean's expand (1), pow's 2 x grad (3), the two gradients of x summed (3): 19.
#   Rotary embedding on q or k (apply_rotary_pos_emb): x * cos (2), rotate_half's negated half
#     and cat (1 + 2), * sin (2), the add (3): 10; backward: two mul backwards (2 + 2), the
#     negation (1), the two gradients of x summed (3): 8.
#   The causal mask added to the scores (the mask broadcast: 3 forward, nothing backward).
#   act_fn(gate) * up: SiLU (2 forward, 3 backward), the product (3 forward; backward two
#     products, 3 each: 6).
#   Token embedding lookup: reads and writes the rows (2); backward index-adds the rows' gradient
#     (3; the vocabulary-sized zero fill is per step, not per sample, and is not counted).
MB_RMSNORM_EAGER = (7, 19)
MB_ROTARY_EAGER = (10, 8)
MB_MASK_ADD = (3, 0)
MB_SILU = (2, 3)
MB_MUL = (3, 6)
MB_EMBEDDING = (2, 3)


def f32(passes, n):
    """A traffic term whose tensors torch.autocast keeps in f32 (bf16-amp, f16-amp): outputs
    of autocast's "CUDA ops that can autocast to float32" (layer_norm, softmax, pow, ...) and
    of ops that "promote to the widest input type" given an f32 input (a residual add of an
    f16 GEMM output to the f32 residual stream, an f32 attention mask added to f16 scores),
    and the gradients of those f32 tensors. The
    residual stream of these transformers is f32: the embeddings are f32 lookups (autocast
    leaves embedding alone) and every LayerNorm or RMSNorm returns f32."""
    return (passes, n, True)


def traffic(*terms):
    """Sums (passes, elements) terms, and f32(...) terms, into (forward, backward) elements
    and, of them, the autocast-f32 (forward, backward) elements."""
    def total(terms, i):
        return int(round(sum(t[0][i] * t[1] for t in terms)))
    f32_terms = [t for t in terms if len(t) == 3]
    return total(terms, 0), total(terms, 1), total(f32_terms, 0), total(f32_terms, 1)


class Model:
    def __init__(self, name, sample, input_features, sources, published_parameters, tokens_per_sample=None):
        self.name = name
        self.sample = sample
        self.input_features = input_features
        # Tokens in one sample (the sequence a step trains on, padding included), for targets in
        # tokens; None for models whose samples are not token sequences.
        self.tokens_per_sample = tokens_per_sample
        self.sources = sources
        self.published_parameters = published_parameters
        self.layers = []

    def add(self, name, type_, params, flops, activations, output_features, memory=None, conv_io=None, gemms=None,
            casts=None, convs=None, bmms=None):
        if convs:
            assert conv_io is None or conv_io == sum(io for _, io in convs), name
            conv_io = sum(io for _, io in convs)
        self.layers.append(dict(name=name, type=type_, params=params, flops=int(round(flops)),
                                activations=int(round(activations)), output_features=int(output_features),
                                memory=memory, conv_io=None if conv_io is None else int(conv_io),
                                convs=[(int(f), int(io)) for f, io in (convs or [])],
                                gemms=gemms or [], bmms=bmms or [],
                                casts=None if casts is None else (int(round(casts[0])), int(round(casts[1])))))

    def parameter_count(self):
        n = 0
        for layer in self.layers:
            for _, shape in layer["params"]:
                c = 1
                for d in shape:
                    c *= d
                n += c
        return n

    def to_yaml(self):
        out = ["# Generated by scenarios/models/generate.py from published hyperparameters; edit that script,",
               "# not this file. Counting conventions are in the script's docstring.",
               f"schema_version: {SCHEMA_VERSION}",
               f"name: {self.name}",
               f"sample: \"{self.sample}\"",
               f"input_features: {self.input_features}"]
        if self.tokens_per_sample is not None:
            out.append(f"tokens_per_sample: {self.tokens_per_sample}")
        out += ["sources:"]
        out += [f"  - \"{s}\"" for s in self.sources]
        out += ["totals:  # checked on load against the sum over layers",
                f"  parameters: {self.parameter_count()}",
                f"  forward_flops_per_sample: {sum(l['flops'] for l in self.layers)}",
                f"  activation_elements_per_sample: {sum(l['activations'] for l in self.layers)}",
                "layers:"]
        for layer in self.layers:
            out.append(f"  - name: {layer['name']}")
            out.append(f"    type: {layer['type']}")
            out.append(f"    forward_flops_per_sample: {layer['flops']}")
            out.append(f"    activation_elements_per_sample: {layer['activations']}")
            out.append(f"    output_features: {layer['output_features']}")
            if layer["memory"] is not None:
                out.append(f"    memory_bound_forward_elements_per_sample: {layer['memory'][0]}")
                out.append(f"    memory_bound_backward_elements_per_sample: {layer['memory'][1]}")
                if layer["memory"][2]:
                    out.append(f"    memory_bound_forward_f32_elements_per_sample: {layer['memory'][2]}")
                if layer["memory"][3]:
                    out.append(f"    memory_bound_backward_f32_elements_per_sample: {layer['memory'][3]}")
            if layer["casts"] is not None:
                if layer["casts"][0]:
                    out.append(f"    autocast_forward_cast_elements_per_sample: {layer['casts'][0]}")
                if layer["casts"][1]:
                    out.append(f"    autocast_backward_cast_elements_per_sample: {layer['casts'][1]}")
            if layer["conv_io"] is not None:
                out.append(f"    conv_io_elements_per_sample: {layer['conv_io']}")
            if layer["convs"]:
                out.append("    convs:")
                for f, io in layer["convs"]:
                    out.append(f"      - {{flops_per_sample: {f}, io_elements_per_sample: {io}}}")
            if layer["gemms"]:
                out.append("    gemms:")
                for rows, n, k in layer["gemms"]:
                    out.append(f"      - {{rows_per_sample: {rows}, n: {n}, k: {k}}}")
            if layer["bmms"]:
                out.append("    bmms:")
                for count, mm, n, k in layer["bmms"]:
                    out.append(f"      - {{count: {count}, m: {mm}, n: {n}, k: {k}}}")
            if layer["params"]:
                out.append("    parameters:")
                for pname, shape in layer["params"]:
                    out.append(f"      - {{name: {pname}, shape: [{', '.join(str(d) for d in shape)}]}}")
            else:
                out.append("    parameters: []")
        return "\n".join(out) + "\n"


# ---- ResNet-50/101/152 (torchvision.models.resnetN, v1.5: stride in the 3x3 conv) ----
# The three share every layer kind; they differ only in the bottleneck blocks per stage
# (He et al. Table 1: 50-layer 3-4-6-3, 101-layer 3-4-23-3, 152-layer 3-8-36-3).
def resnet(depth, blocks_per_stage, gmacs, published):
    m = Model(f"resnet{depth}", "one 224x224 RGB image", 3 * 224 * 224,
              [f"He et al. 2015, Deep Residual Learning for Image Recognition, arXiv:1512.03385, Table 1 ({depth}-layer)",
               f"torchvision.models.resnet{depth} (ResNet v1.5, stride 2 in the 3x3 conv): parameter names and order",
               f"FLOPs from the conv shapes: 2 x Cin x Cout x K x K x Hout x Wout ({gmacs} GMACs: torchvision's"
               " documented figure for v1.5; Table 1 counts v1's stride in the 1x1 conv)"],
              published_parameters=published)

    def conv_flops(cin, cout, k, hout):
        return 2 * cin * cout * k * k * hout * hout

    # Stem: conv1 7x7/2 -> bn1 -> relu -> maxpool 3x3/2.
    h = 112
    flops = conv_flops(3, 64, 7, h) + (BATCHNORM + RELU) * 64 * h * h + 9 * 64 * 56 * 56
    # Saved: the input image (conv1), conv1 output (bn1), relu output (maxpool),
    # maxpool output and its int64 indices (2 f32 elements each).
    acts = 3 * 224 * 224 + 2 * 64 * h * h + 3 * 64 * 56 * 56
    # Max pooling 3x3/2 with indices: forward reads the input, writes the output and its
    # int64 indices; backward zero-fills the input gradient, reads dy and the indices and
    # scatters into it.
    pool_in, pool_out = 64 * h * h, 64 * 56 * 56
    maxpool = ((pool_in + 3 * pool_out, 2 * pool_in + 3 * pool_out), 1)
    memory = traffic((MB_BN, 64 * h * h), (MB_RELU, 64 * h * h), maxpool)
    m.add("stem", "Conv2d+BatchNorm2d+ReLU+MaxPool2d",
          [("conv1.weight", [64, 3, 7, 7]), ("bn1.weight", [64]), ("bn1.bias", [64])], flops, acts, 64 * 56 * 56,
          memory=memory, convs=[(conv_flops(3, 64, 7, h), 3 * 224 * 224 + 64 * h * h)],
          casts=(3 * 224 * 224, 0))  # the f32 image; no gradient

    cin, size = 64, 56
    stages = zip((64, 128, 256, 512), blocks_per_stage, (1, 2, 2, 2))
    for stage, (width, blocks, stride) in enumerate(stages, start=1):
        for b in range(blocks):
            s = stride if b == 0 else 1
            out_size = size // s
            cout = width * 4
            params = [("conv1.weight", [width, cin, 1, 1]), ("bn1.weight", [width]), ("bn1.bias", [width]),
                      ("conv2.weight", [width, width, 3, 3]), ("bn2.weight", [width]), ("bn2.bias", [width]),
                      ("conv3.weight", [cout, width, 1, 1]), ("bn3.weight", [cout]), ("bn3.bias", [cout])]
            flops = (conv_flops(cin, width, 1, size) + (BATCHNORM + RELU) * width * size * size +
                     conv_flops(width, width, 3, out_size) + (BATCHNORM + RELU) * width * out_size ** 2 +
                     conv_flops(width, cout, 1, out_size) + BATCHNORM * cout * out_size ** 2 +
                     (ADD + RELU) * cout * out_size ** 2)
            # conv1/bn1/relu and conv2/bn2/relu each save a conv output and a ReLU
            # output; conv3/bn3 saves the conv3 output; the block output after
            # add+relu is saved once (next block's input and this ReLU's output).
            acts = 2 * width * size * size + 2 * width * out_size ** 2 + cout * out_size ** 2 + cout * out_size ** 2
            e1, e2, e3 = width * size * size, width * out_size ** 2, cout * out_size ** 2
            # bn1+relu, bn2+relu, bn3, the residual add and the last relu in place; the block
            # input feeds conv1 and the shortcut, so its two gradients are summed.
            terms = [(MB_BN, e1), (MB_RELU, e1), (MB_BN, e2), (MB_RELU, e2), (MB_BN, e3), (MB_ADD, e3),
                     (MB_RELU, e3), (MB_ACCUMULATE, cin * size * size)]
            convs = [(conv_flops(cin, width, 1, size), cin * size * size + e1),
                     (conv_flops(width, width, 3, out_size), e1 + e2),
                     (conv_flops(width, cout, 1, out_size), e2 + e3)]
            if b == 0:
                params += [("downsample.0.weight", [cout, cin, 1, 1]), ("downsample.1.weight", [cout]),
                           ("downsample.1.bias", [cout])]
                flops += conv_flops(cin, cout, 1, out_size) + BATCHNORM * cout * out_size ** 2
                acts += cout * out_size ** 2
                terms.append((MB_BN, cout * out_size ** 2))
                convs.append((conv_flops(cin, cout, 1, out_size), cin * size * size + cout * out_size ** 2))
            m.add(f"layer{stage}.{b}", "Bottleneck", params, flops, acts, cout * out_size ** 2,
                  memory=traffic(*terms), convs=convs)
            cin, size = cout, out_size
    # Global average pool then fc; fc saves its 2048-element input.
    # Average pooling reads 2048 x 7 x 7 and writes 2048 (backward the reverse); fc's bias gradient.
    avgpool = ((2048 * 49 + 2048, 2048 * 49 + 2048), 1)
    m.add("fc", "AdaptiveAvgPool2d+Linear", [("fc.weight", [1000, 2048]), ("fc.bias", [1000])],
          2048 * 7 * 7 + 2 * 2048 * 1000 + 1000, 2048, 1000, memory=traffic(avgpool, (MB_BIAS_GRAD, 1000)))
    return m


# ---- Transformers -----------------------------------------------------------------
def attention_flops(s, h, a):
    # QK^T and attention x V: 2 x s x s x h each; softmax over a x s x s scores.
    return 4 * s * s * h + SOFTMAX * a * s * s


def attention_bmms(s, h, a):
    # The same two products as batched matmuls per sample, (count, m, n, k): for each head
    # QK^T, [s, s] over the head size, and the scores times V, [s, head size] over s. The
    # twin runs each as its own kernel: reading and writing the s x s scores makes them
    # memory-bound on Tensor Cores at a head size of 64.
    d = h // a
    return [(a, s, s, d), (a, s, d, s)]


def gpt2(name, n_layer, h, a, published, sources):
    s, vocab = 1024, 50257
    m = Model(name, "a 1,024-token sequence", s, sources, published, tokens_per_sample=s)
    # wte and wpe lookups: no FLOPs worth counting; embedding dropout saves a mask.
    sh, as2 = s * h, a * s * s
    m.add("embeddings", "GPT2Embeddings", [("wte.weight", [vocab, h]), ("wpe.weight", [s, h])],
          ADD * s * h, s * h / 4, s * h, memory=traffic((MB_ADD, sh), (MB_DROPOUT, sh)))
    # Hugging Face GPT2Block, eager: ln_1; c_attn; the head split made contiguous for the
    # batched matmuls (q, k, v); scores scaled, causal-masked (torch.where), softmax,
    # dropout; the head merge; c_proj, dropout, residual add; ln_2; c_fc, gelu_new (eager),
    # c_proj, dropout, residual add. The block input and the mid residual each feed two ops
    # (their gradients are summed); the four Conv1D biases' gradients are row sums.
    # Under autocast: LayerNorms and softmax f32 (HF casts the probabilities back to the value
    # dtype before dropout), residual adds and the stream's gradient sums f32, gelu_new f32 from
    # its pow (fp32 list) on; the scale and causal mask (in the scores' dtype), the copies, the
    # dropouts and the bias rows f16.
    block_memory = traffic(f32(MB_LAYERNORM, 2 * sh), (MB_COPY, 4 * sh), (MB_SCALE, 2 * as2),
                           f32(MB_SOFTMAX, as2), (MB_DROPOUT, as2), (MB_DROPOUT, 2 * sh), f32(MB_ADD, 2 * sh),
                           f32(MB_ACCUMULATE, 2 * sh), f32(MB_GELU_EAGER, 4 * sh), (MB_BIAS_GRAD, 9 * sh))
    for i in range(n_layer):
        params = [("ln_1.weight", [h]), ("ln_1.bias", [h]),
                  ("attn.c_attn.weight", [h, 3 * h]), ("attn.c_attn.bias", [3 * h]),
                  ("attn.c_proj.weight", [h, h]), ("attn.c_proj.bias", [h]),
                  ("ln_2.weight", [h]), ("ln_2.bias", [h]),
                  ("mlp.c_fc.weight", [h, 4 * h]), ("mlp.c_fc.bias", [4 * h]),
                  ("mlp.c_proj.weight", [4 * h, h]), ("mlp.c_proj.bias", [h])]
        flops = (2 * s * 12 * h * h + attention_flops(s, h, a) + 2 * LAYERNORM * s * h + GELU * s * 4 * h +
                 2 * ADD * s * h)
        # Korthikanti et al. Sec. 4.1 in elements: attention 5sh + 2as^2 (+ masks as^2 + sh),
        # MLP 9sh (+ mask sh), two LayerNorms 2sh.
        acts = 16 * s * h + 2 * a * s * s + (a * s * s + 2 * s * h) / 4
        # Autocast casts: c_attn's and c_fc's f32 LayerNorm inputs, the probabilities cast back to
        # the value dtype (softmax writes f32 itself: autocast passes dtype=float32), gelu_new's f32
        # output for c_proj: 6sh + as^2.
        # Its weight GEMMs (rows per sample, n, k; Conv1D's [h, n] weights): c_attn, attn.c_proj,
        # mlp.c_fc, mlp.c_proj.
        m.add(f"h.{i}", "GPT2Block", params, flops, acts, s * h, memory=block_memory,
              casts=(6 * sh + as2, 6 * sh + as2), bmms=attention_bmms(s, h, a),
              gemms=[(s, 3 * h, h), (s, h, h), (s, 4 * h, h), (s, h, 4 * h)])
    # ln_f then the LM head (tied to wte, so no parameter of its own); logits are saved
    # by the loss (softmax), the ln_f output by the head's weight gradient.
    m.add("ln_f+lm_head", "LayerNorm+TiedLinear", [("ln_f.weight", [h]), ("ln_f.bias", [h])],
          LAYERNORM * s * h + 2 * s * h * vocab, 2 * s * h + s * vocab, s * vocab,
          memory=traffic(f32(MB_LAYERNORM, sh)), casts=(sh, sh),  # the head's f32 LayerNorm input
          gemms=[(s, vocab, h)])
    return m


BERT_LARGE_SOURCES = [
    "Devlin et al. 2018, BERT, arXiv:1810.04805, Sec. 3 (BERT-LARGE: L=24, H=1024, A=16)",
    "Hugging Face transformers BertForPreTraining (bert-large-uncased config): parameter names and order;"
    " MLM decoder tied to the word embeddings; MLM logits for every position as HF computes them",
    "FLOPs from the GEMM shapes; activations after Korthikanti et al. 2022, arXiv:2205.05198, Sec. 4.1"]

# NVIDIA DeepLearningExamples' BERT phase 2 (PyTorch/LanguageModeling/BERT, January 2022 onwards,
# the pytorch:21.11-py3 results): what one "sequence" of its README's throughput costs.
#   * Binned phase 2 (changelog: "Binned pretraining for phase2 with LDDL using a bin size of 64";
#     scripts/run_pretraining.sh passes --bin-size 64 to LDDL's preprocessor): every batch comes
#     from one 64-token bin and "is only padded to the longest sequence within this mini-batch"
#     (LDDL README, "Sequence binning"), not to 512.
#   * The Wikipedia phase-2 sequences are about half padding at 512: Kosec, Fu and Krell 2021,
#     arXiv:2107.02027, abstract ("at sequence length 512 padding tokens represent in excess of
#     50% of the Wikipedia dataset used for pretraining BERT"); Zeng et al., openreview
#     3nzKUh9a4M, 48 % for Wikipedia+BookCorpus at 512. Mean real length: 256 tokens; a batch of
#     16 from a 64-token bin is padded to within a few tokens of the bin's end, about half a bin
#     (32 tokens) above its mean: 288 tokens per sequence.
#     Every layer is costed at that length (the attention term, quadratic in the length, is
#     then slightly low: E[L^2] > E[L]^2).
#   * Dense sequence output (run_pretraining.py's default, --no_dense_sequence_output off):
#     modeling.py's BertPreTrainingHeads index_selects the masked positions before the MLM
#     transform and decoder; 15 % of the real tokens are masked (max_predictions_per_seq 80):
#     0.15 x 256 = 38 positions per sequence.
#   * torch.jit.script with NVFuser (run_pretraining.py: _jit_set_nvfuser_enabled(True)): the
#     score chain (scale, mask add, softmax, dropout) runs as one kernel, and each
#     dropout + residual add + LayerNorm as one; the sequence-first layout passes q, k, v to
#     bmm as strided views, so only the context's head merge is a copy (modeling.py,
#     BertSelfAttention.forward).
DLE_PHASE2_REAL_TOKENS = 256
DLE_PHASE2_BIN_TOKENS = 64
DLE_PHASE2_TOKENS = DLE_PHASE2_REAL_TOKENS + DLE_PHASE2_BIN_TOKENS // 2
DLE_PHASE2_MLM_POSITIONS = round(0.15 * DLE_PHASE2_REAL_TOKENS)
# Fused kernels' passes (forward, backward), counted as MB_* above:
#   scale + mask + softmax + dropout: reads the scores, writes the probabilities (saved), the
#     dropped-out probabilities and a 1-byte mask (3.25); backward reads dy, the mask and the
#     probabilities and writes dx (3.25).
#   dropout + residual add + LayerNorm: reads x and the residual, writes y, the mask and the
#     LayerNorm input (saved) (4.25); backward as LayerNorm's (5) plus reading the mask (5.25).
MB_SOFTMAX_CHAIN_FUSED = (3.25, 3.25)
MB_DROPOUT_ADD_LAYERNORM_FUSED = (4.25, 5.25)


def bert(name, sample, s, sources, mlm_positions=None, fused=False):
    """BertForPreTraining (BERT-large) at `s` tokens per sample. mlm_positions: the MLM head
    runs on that many positions per sample (dense sequence output), else on all `s`.
    fused: NVFuser's fused kernels and the sequence-first layout (DeepLearningExamples)."""
    h, a, n_layer, f, vocab, positions = 1024, 16, 24, 4096, 30522, 512
    m = Model(name, sample, s, sources, published_parameters=336_226_108, tokens_per_sample=s)
    m.add("embeddings", "BertEmbeddings",
          [("word_embeddings.weight", [vocab, h]), ("position_embeddings.weight", [positions, h]),
           ("token_type_embeddings.weight", [2, h]), ("LayerNorm.weight", [h]), ("LayerNorm.bias", [h])],
          2 * ADD * s * h + LAYERNORM * s * h, 2 * s * h + s * h / 4, s * h,
          memory=traffic((MB_ADD, 2 * s * h), (MB_LAYERNORM, s * h), (MB_DROPOUT, s * h)))
    sh, as2 = s * h, a * s * s
    # Under autocast: the f32 attention mask (the extended mask is made in the parameters'
    # dtype) promotes the scores, so the mask add, softmax and attention dropout are f32; the
    # residual adds, LayerNorms and gradient sums f32; copies, scale, hidden dropouts, GELU and
    # bias rows f16. Fused (DeepLearningExamples from its LDDL/NVFuser release, a9e2c1d5, whose
    # README rows the fidelity table holds): LinearActivation runs F.linear with its bias, then
    # GELU, so GELU is f16 there too (the earlier bias_gelu added the f32 bias first).
    if fused:
        layer_memory = traffic((MB_COPY, sh), f32(MB_SOFTMAX_CHAIN_FUSED, as2),
                               f32(MB_DROPOUT_ADD_LAYERNORM_FUSED, 2 * sh), (MB_GELU_FUSED, s * f),
                               f32(MB_ACCUMULATE, 4 * sh), (MB_BIAS_GRAD, 5 * sh + s * f))
    else:
        # BertLayer, eager: query, key, value; the head split made contiguous for the batched
        # matmuls; scores scaled, the attention mask added (its backward passes the gradient
        # on), softmax, dropout; the head merge; output dense, dropout, residual add,
        # LayerNorm; intermediate dense and GELU (one kernel); output dense, dropout, residual
        # add, LayerNorm. The layer input feeds query, key, value and the residual (three
        # gradient sums), the attention output the MLP and the residual (one); six bias rows sums.
        layer_memory = traffic((MB_COPY, 4 * sh), (MB_SCALE, as2), f32((2, 0), as2), f32(MB_SOFTMAX, as2),
                               f32(MB_DROPOUT, as2), (MB_DROPOUT, 2 * sh), f32(MB_ADD, 2 * sh),
                               f32(MB_LAYERNORM, 2 * sh), (MB_GELU_FUSED, s * f), f32(MB_ACCUMULATE, 4 * sh),
                               (MB_BIAS_GRAD, 5 * sh + s * f))
    for i in range(n_layer):
        params = []
        for proj in ("query", "key", "value"):
            params += [(f"attention.self.{proj}.weight", [h, h]), (f"attention.self.{proj}.bias", [h])]
        params += [("attention.output.dense.weight", [h, h]), ("attention.output.dense.bias", [h]),
                   ("attention.output.LayerNorm.weight", [h]), ("attention.output.LayerNorm.bias", [h]),
                   ("intermediate.dense.weight", [f, h]), ("intermediate.dense.bias", [f]),
                   ("output.dense.weight", [h, f]), ("output.dense.bias", [h]),
                   ("output.LayerNorm.weight", [h]), ("output.LayerNorm.bias", [h])]
        flops = (2 * s * (4 * h * h + 2 * h * f) + attention_flops(s, h, a) + 2 * LAYERNORM * s * h +
                 GELU * s * f + 2 * ADD * s * h)
        acts = 16 * s * h + 2 * a * s * s + (a * s * s + 2 * s * h) / 4
        # Its weight GEMMs, (rows per sample, n, k): query, key, value, attention output,
        # intermediate, output (the twin's wave model needs their shapes).
        gemms = [(s, h, h)] * 4 + [(s, f, h), (s, h, f)]
        # Autocast casts (eager; fused, NVFuser folds them into its kernels): query, key and value
        # each cast the f32 layer input, the f32 probabilities meet the context matmul, the
        # intermediate dense takes the f32 LayerNorm output: 4sh + as^2.
        casts = None if fused else (4 * sh + as2, 4 * sh + as2)
        m.add(f"encoder.layer.{i}", "BertLayer", params, flops, acts, s * h, memory=layer_memory, gemms=gemms,
              casts=casts, bmms=attention_bmms(s, h, a))
    # Pooler (first token) and NSP head, then the MLM head: dense, GELU, LayerNorm,
    # decoder tied to word_embeddings with its own bias, on `p` positions per sample.
    p = s if mlm_positions is None else mlm_positions
    ph = p * h
    memory = [(MB_GELU_FUSED, ph), f32(MB_LAYERNORM, ph)]
    if mlm_positions is not None:
        # index_select of the masked rows (reads and writes them; backward scatters them back
        # into a zeroed s x h gradient: the zero fill writes s x h, index_add reads and writes p rows),
        # all on the f32 sequence output.
        memory += [f32((2, 0), ph), f32((0, 2), ph), f32((0, 1), sh)]
    m.add("pooler+heads", "BertPreTrainingHeads",
          [("pooler.dense.weight", [h, h]), ("pooler.dense.bias", [h]),
           ("cls.predictions.bias", [vocab]),
           ("cls.predictions.transform.dense.weight", [h, h]), ("cls.predictions.transform.dense.bias", [h]),
           ("cls.predictions.transform.LayerNorm.weight", [h]), ("cls.predictions.transform.LayerNorm.bias", [h]),
           ("cls.seq_relationship.weight", [2, h]), ("cls.seq_relationship.bias", [2])],
          2 * h * h + 2 * h * 2 + 2 * p * h * h + GELU * p * h + LAYERNORM * p * h + 2 * p * h * vocab,
          4 * p * h + p * vocab, p * vocab + 2,
          memory=traffic(*memory), gemms=[(1, h, h), (p, h, h), (p, vocab, h)],
          # eager casts the f32 pooler input, the transform's f32 input and the decoder's f32
          # LayerNorm input (fused: folded into NVFuser's kernels)
          casts=None if fused else (h + 2 * ph, h + 2 * ph))
    return m


def bert_large():
    return bert("bert-large", "a 512-token sequence (pre-training, MLM and NSP heads)", 512, BERT_LARGE_SOURCES)


def bert_large_dle_phase2():
    return bert("bert-large-dle-phase2",
                f"one phase-2 sequence of NVIDIA DeepLearningExamples' BERT pre-training: {DLE_PHASE2_REAL_TOKENS} real"
                f" tokens on average, padded to its {DLE_PHASE2_BIN_TOKENS}-token bin ({DLE_PHASE2_TOKENS} tokens), MLM"
                f" head on the {DLE_PHASE2_MLM_POSITIONS} masked positions",
                DLE_PHASE2_TOKENS,
                BERT_LARGE_SOURCES[:1] + [
                    "NVIDIA DeepLearningExamples PyTorch/LanguageModeling/BERT (2022: LDDL, NVFuser): modeling.py"
                    " (parameter names as HF's; sequence-first attention; MLM head on the masked positions),"
                    " run_pretraining.py (torch.jit.script with NVFuser), scripts/run_pretraining.sh (phase 2:"
                    " --bin-size 64, max_predictions_per_seq 80), README changelog January 2022",
                    "Sequence lengths: Kosec, Fu, Krell 2021, arXiv:2107.02027 (Wikipedia at 512: over 50 % padding);"
                    " 256 real tokens, padded to the 64-token bin: 288",
                    BERT_LARGE_SOURCES[2]],
                mlm_positions=DLE_PHASE2_MLM_POSITIONS, fused=True)


def llama2_7b():
    s, h, a, n_layer, f, vocab = 4096, 4096, 32, 32, 11008, 32000
    m = Model("llama-2-7b", "a 4,096-token sequence", s,
              ["Touvron et al. 2023, Llama 2, arXiv:2307.09288, Table 1 and Sec. 2.2 (7B: context 4,096)",
               "Hugging Face transformers LlamaForCausalLM with meta-llama/Llama-2-7b-hf config.json (hidden 4096,"
               " intermediate 11008, 32 layers, 32 heads, vocab 32000, untied lm_head): parameter names and order",
               "FLOPs from the GEMM shapes; activations after Korthikanti et al. 2022 adapted to SwiGLU, RMSNorm, "
               "no dropout"],
              published_parameters=6_738_415_616, tokens_per_sample=s)
    sh, as2, sf = s * h, a * s * s, s * f
    m.add("embed_tokens", "Embedding", [("embed_tokens.weight", [vocab, h])], 0, 0, s * h,
          memory=traffic((MB_EMBEDDING, sh)))
    # LlamaDecoderLayer, eager: two RMSNorms; q, k, v split into heads and made contiguous for
    # the batched matmuls, rotary on q and k; scores scaled, causal mask added, softmax; the head
    # merge; two residual adds; SiLU(gate) * up. Gradient sums: the layer input and the mid
    # residual (norm and residual), the first norm's output (q, k, v: two sums), the second's
    # (gate and up): five in all. No biases.
    # Under autocast: RMSNorm computes in f32 (LlamaRMSNorm casts to float32), the f32 causal
    # mask promotes the scores, softmax runs with dtype=float32, residual adds and gradient sums
    # f32; rotary (cos and sin cast to q's dtype), the copies, the scale, SiLU and the product f16.
    layer_memory = traffic(f32(MB_RMSNORM_EAGER, 2 * sh), (MB_ROTARY_EAGER, 2 * sh), (MB_COPY, 4 * sh),
                           (MB_SCALE, as2), f32(MB_MASK_ADD, as2), f32(MB_SOFTMAX, as2), f32(MB_ADD, 2 * sh),
                           f32(MB_ACCUMULATE, 5 * sh), (MB_SILU, sf), (MB_MUL, sf))
    for i in range(n_layer):
        params = [("self_attn.q_proj.weight", [h, h]), ("self_attn.k_proj.weight", [h, h]),
                  ("self_attn.v_proj.weight", [h, h]), ("self_attn.o_proj.weight", [h, h]),
                  ("mlp.gate_proj.weight", [f, h]), ("mlp.up_proj.weight", [f, h]),
                  ("mlp.down_proj.weight", [h, f]),
                  ("input_layernorm.weight", [h]), ("post_attention_layernorm.weight", [h])]
        flops = (2 * s * (4 * h * h + 3 * h * f) + attention_flops(s, h, a) + 2 * LAYERNORM * s * h +
                 4 * s * f + 2 * ADD * s * h)
        # Attention 5sh + as^2 (no dropout: the softmax output feeds attention x V);
        # SwiGLU MLP: input sh, gate, up, silu(gate) and the product 4sf; two RMSNorm inputs 2sh.
        acts = 8 * s * h + a * s * s + 4 * s * f
        # Autocast casts: q, k, v and gate, up each cast their f32 RMSNorm input (5sh); the
        # float32 softmax's output cast back to the query dtype (as^2).
        # Its weight GEMMs (rows per sample, n, k): q, k, v, o, gate, up, down.
        m.add(f"layers.{i}", "LlamaDecoderLayer", params, flops, acts, s * h, memory=layer_memory,
              casts=(5 * sh + as2, 5 * sh + as2), bmms=attention_bmms(s, h, a),
              gemms=[(s, h, h)] * 4 + [(s, f, h), (s, f, h), (s, h, f)])
    m.add("norm+lm_head", "RMSNorm+Linear", [("norm.weight", [h]), ("lm_head.weight", [vocab, h])],
          LAYERNORM * s * h + 2 * s * h * vocab, 2 * s * h + s * vocab, s * vocab,
          memory=traffic(f32(MB_RMSNORM_EAGER, sh)), casts=(sh, sh),  # the head's f32 RMSNorm input
          gemms=[(s, vocab, h)])
    return m


def main():
    gpt2_sources = ["Radford et al. 2019, Language Models are Unsupervised Multitask Learners, Table 2",
                    "Hugging Face transformers GPT2LMHeadModel and the openai-community/{} config.json (n_ctx 1024,"
                    " vocab 50257, LM head tied to wte): parameter names and order",
                    "FLOPs from the GEMM shapes (24sh^2 + 4s^2h per block, Narayanan et al. 2021, arXiv:2104.04473);"
                    " activations after Korthikanti et al. 2022, arXiv:2205.05198, Sec. 4.1"]
    # Parameter counts: torchvision's model documentation (resnet50 25,557,032; resnet101
    # 44,549,160; resnet152 60,192,808).
    models = [resnet(50, (3, 4, 6, 3), 4.1, 25_557_032),
              resnet(101, (3, 4, 23, 3), 7.8, 44_549_160),
              resnet(152, (3, 8, 36, 3), 11.5, 60_192_808),
              bert_large(),
              bert_large_dle_phase2(),
              gpt2("gpt2-124m", 12, 768, 12, 124_439_808, [s.format("gpt2") for s in gpt2_sources]),
              gpt2("gpt2-1.5b", 48, 1600, 25, 1_557_611_200, [s.format("gpt2-xl") for s in gpt2_sources]),
              llama2_7b()]
    for m in models:
        n = m.parameter_count()
        if m.published_parameters is not None and n != m.published_parameters:
            sys.exit(f"generate.py: {m.name} has {n} parameters, the published count is {m.published_parameters}")
        path = os.path.join(HERE, m.name + ".yaml")
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(m.to_yaml())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        print(f"{m.name}: {n:,} parameters, {sum(l['flops'] for l in m.layers) / 1e9:.2f} GFLOP forward per sample,"
              f" {len(m.layers)} layers -> {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
