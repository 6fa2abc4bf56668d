#include "engine/nn/model_transformer.hpp"

#include <charconv>
#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/core/fault_injection.hpp"

namespace dpt {
namespace {

// Element-wise FLOPs per element, as engine/core/kernels.cpp charges them (and
// scenarios/models/generate.py counts them).
constexpr double kGelu = 12, kLayerNorm = 8, kSoftmax = 5, kAdd = 1;

// Rounds as generate.py does (Python's round: half to even), so the descriptions
// equal the library files to the element.
std::int64_t round_half_even(double x) { return static_cast<std::int64_t>(std::nearbyint(x)); }

void add_layer(ModelDescription& m, std::string name, std::string type, std::vector<ParameterDescription> params,
               double flops, double activations, std::int64_t output_features) {
  m.layers.push_back({std::move(name), std::move(type), std::move(params),
                      static_cast<double>(round_half_even(flops)), round_half_even(activations), output_features});
}

// QK^T and attention x V (2 x s x s x h each) and the softmax over a x s x s scores.
double attention_flops(double s, double h, double a) { return 4 * s * s * h + kSoftmax * a * s * s; }

// Eager attention's two batched matmuls per sample, as the layer's FLOPs count them: for each
// of `heads` heads, QK^T ([s, s] over the head size) and the scores times V ([s, head size]
// over s); 2 x s x s x h FLOPs each.
std::vector<BmmDescription> attention_bmms(std::int64_t s, std::int64_t hidden, std::int64_t heads) {
  const std::int64_t d = hidden / heads;
  return {{heads, s, s, d}, {heads, s, d, s}};
}

// Whether a block built with `attn` keeps eager attention's s x s tensors: eager, or sdpa
// under the planted fault that forgets to drop them.
bool saves_scores(AttentionImpl attn) {
  return attn == AttentionImpl::eager || fault_active(Fault::sdpa_scores_saved);
}

// Sets a block's attention as `attn` runs it: eager's two batched matmuls, or one fused
// sdpa kernel over the same heads (head size hidden / heads).
void set_attention(LayerDescription& l, AttentionImpl attn, std::int64_t s, std::int64_t hidden, std::int64_t heads,
                   bool causal) {
  if (attn == AttentionImpl::eager) {
    l.bmms = attention_bmms(s, hidden, heads);
    return;
  }
  l.sdpa = SdpaDescription{heads, s, s, hidden / heads, causal};
}

// The softmax FLOPs eager attention counts (kSoftmax x a x s^2): inside sdpa's fused kernel,
// whose FLOPs count its matmuls alone (FlashAttention's convention), so an sdpa block's
// FLOPs leave them out.
double softmax_flops(AttentionImpl attn, double s, double a) {
  return attn == AttentionImpl::sdpa ? kSoftmax * a * s * s : 0.0;
}

// One encoder/decoder block with a GELU MLP of width f: the GEMMs (4h^2 attention,
// 2hf MLP per token), attention, two LayerNorms, GELU and two residual adds.
double gelu_block_flops(double s, double h, double a, double f) {
  return 2 * s * (4 * h * h + 2 * h * f) + attention_flops(s, h, a) + 2 * kLayerNorm * s * h + kGelu * s * f +
         2 * kAdd * s * h;
}

// Korthikanti et al. Sec. 4.1 in elements: LayerNorm inputs 2sh, attention 5sh +
// 2as^2, MLP sh + 2sf (16sh in all for f = 4h), dropout masks (as^2 + 2sh) / 4.
// Under sdpa the fused kernel saves no s x s tensor (no probabilities, no dropout output,
// no attention dropout mask: its dropout regenerates from the RNG seed). It saves q, k, v
// (counted above) and its output, which it writes in the (batch, seq, heads, head size)
// layout, so transformers' transpose(1, 2).contiguous() copies nothing and the projection
// saves that same tensor (counted above, once); and a log-sum-exp per query and head (as,
// counted as elements of the activation type: f32 in every precision, so under autocast it
// holds 2 bytes more each, 1/64 of an sh tensor at a head size of 64).
double gelu_block_activations(double s, double h, double a, double f, AttentionImpl attn = AttentionImpl::eager) {
  if (!saves_scores(attn)) return 8 * s * h + 2 * s * f + a * s + 2 * s * h / 4;
  return 8 * s * h + 2 * s * f + 2 * a * s * s + (a * s * s + 2 * s * h) / 4;
}

// Memory-bound traffic, counted kernel by kernel as scenarios/models/generate.py counts it:
// elements read plus written per element of a tensor, forward and backward (its MB_* table).
struct Passes {
  double forward = 0, backward = 0;
};
constexpr Passes kLayerNormPasses{3, 5}, kDropoutPasses{2.25, 2.25}, kAddPasses{3, 0}, kAccumulatePasses{0, 3},
    kScalePasses{2, 2}, kSoftmaxPasses{2, 3}, kGeluPasses{2, 3}, kGeluEagerPasses{18, 28}, kCopyPasses{2, 2},
    kBiasGradPasses{0, 1}, kMaskAddPasses{2, 0},
    // Hugging Face Llama, eager (generate.py's MB_* for Llama): RMSNorm, rotary on q or k, the
    // broadcast causal mask added, SiLU, the gate * up product, the token lookup.
    kRmsNormEagerPasses{7, 19}, kRotaryEagerPasses{10, 8}, kBroadcastMaskAddPasses{3, 0}, kSiluPasses{2, 3},
    kMulPasses{3, 6}, kEmbeddingPasses{2, 3},
    // NVFuser's fused scale + mask + softmax + dropout, and dropout + residual add + LayerNorm.
    kSoftmaxChainFusedPasses{3.25, 3.25}, kDropoutAddLayerNormFusedPasses{4.25, 5.25};

// One kernel kind's traffic: its passes over `elements` elements per sample. kF32: under
// bf16/f16 autocast its tensors are f32 (generate.py's f32(...) terms): outputs of autocast's
// fp32 list (LayerNorm, softmax, pow in GPT-2's gelu_new) and of ops that promote to their
// widest input (the residual stream's adds, an f32 mask added to f16 scores), and the
// gradients of the f32 residual stream.
struct Term {
  Passes passes;
  double elements = 0;
  bool autocast_f32 = false;
};
constexpr bool kF32 = true;

// Sets a layer's counted traffic: the sum of passes x elements, rounded as generate.py rounds,
// and of it the autocast-f32 share (set where it is not zero, as generate.py writes it).
void set_traffic(LayerDescription& l, std::initializer_list<Term> terms) {
  // Planted fault: the layer keeps the saved-activation estimate instead of its count.
  if (fault_active(Fault::spec_transformer_traffic_uncounted)) return;
  double forward = 0, backward = 0, forward32 = 0, backward32 = 0;
  for (const Term& t : terms) {
    forward += t.passes.forward * t.elements;
    backward += t.passes.backward * t.elements;
    if (t.autocast_f32) {
      forward32 += t.passes.forward * t.elements;
      backward32 += t.passes.backward * t.elements;
    }
  }
  l.memory_bound_forward_elements_per_sample = round_half_even(forward);
  l.memory_bound_backward_elements_per_sample = round_half_even(backward);
  if (round_half_even(forward32) > 0) l.memory_bound_forward_f32_elements_per_sample = round_half_even(forward32);
  if (round_half_even(backward32) > 0) l.memory_bound_backward_f32_elements_per_sample = round_half_even(backward32);
}

// Sets a layer's autocast casts per sample (generate.py's casts=...): the same count each
// way, backward casting each forward cast's gradient back.
void set_casts(LayerDescription& l, double elements) {
  if (round_half_even(elements) <= 0) return;
  l.autocast_forward_cast_elements_per_sample = round_half_even(elements);
  l.autocast_backward_cast_elements_per_sample = round_half_even(elements);
}

void require_positive(const std::string& model, const char* key, std::int64_t v) {
  if (v <= 0) throw std::invalid_argument(fmt::format("model {}: {} must be positive, got {}", model, key, v));
}

void require_heads_divide(const std::string& model, std::int64_t hidden, std::int64_t heads) {
  if (hidden % heads != 0)
    throw std::invalid_argument(
        fmt::format("model {}: heads={} does not divide hidden={} (head size must be whole)", model, heads, hidden));
}

}  // namespace

AttentionImpl parse_attention_impl(const std::string& value, const std::string& where) {
  if (value == "eager") return AttentionImpl::eager;
  if (value == "sdpa" || value == "flash_attention_2") return AttentionImpl::sdpa;
  throw std::invalid_argument(fmt::format("{}: attention '{}' is not one dptwin models (eager; sdpa, or "
                                          "flash_attention_2: the same FlashAttention-2 kernels)",
                                          where, value));
}

TransformerSpec parse_transformer_spec(const std::string& spec) {
  const std::string prefix = "transformer:";
  const std::string form = "transformer:layers=L,hidden=H,heads=A,seq=S,vocab=V[,mlp=F][,tied][,attn=sdpa]";
  if (spec.rfind(prefix, 0) != 0) throw std::invalid_argument(fmt::format("model spec '{}': expected {}", spec, form));
  TransformerSpec s;
  std::map<std::string, std::int64_t*> keys{{"layers", &s.layers}, {"hidden", &s.hidden}, {"heads", &s.heads},
                                            {"seq", &s.seq},       {"vocab", &s.vocab}};
  std::int64_t mlp = 0;
  std::map<std::string, bool> seen;
  const std::string body = spec.substr(prefix.size());
  size_t start = 0;
  while (start <= body.size()) {
    const size_t end = std::min(body.find(',', start), body.size());
    const std::string item = body.substr(start, end - start);
    start = end + 1;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    if (seen[key]) throw std::invalid_argument(fmt::format("model spec '{}': key '{}' given twice", spec, key));
    seen[key] = true;
    if (key == "tied" && eq == std::string::npos) {
      s.tied = true;
      continue;
    }
    if (key == "attn" && eq != std::string::npos) {
      s.attn = parse_attention_impl(item.substr(eq + 1), fmt::format("model spec '{}'", spec));
      continue;
    }
    std::int64_t* target = key == "mlp" ? &mlp : (keys.count(key) ? keys[key] : nullptr);
    if (!target || eq == std::string::npos)
      throw std::invalid_argument(fmt::format("model spec '{}': '{}' is not a key of {}", spec, item, form));
    const std::string value = item.substr(eq + 1);
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), *target);
    if (value.empty() || ec != std::errc() || ptr != value.data() + value.size() || *target < 1)
      throw std::invalid_argument(
          fmt::format("model spec '{}': {} is '{}', not a positive integer", spec, key, value));
    const std::int64_t most = key == "layers"                    ? kMaxTransformerLayers
                              : key == "hidden" || key == "heads" ? kMaxTransformerHidden
                              : key == "mlp"                      ? kMaxTransformerIntermediate
                              : key == "seq"                      ? kMaxTransformerPositions
                                                                  : kMaxTransformerVocab;
    if (*target > most)
      throw std::invalid_argument(
          fmt::format("model spec '{}': {} is {}, more than {}, the largest dptwin models", spec, key, *target, most));
  }
  for (const auto& [key, _] : keys)
    if (!seen[key]) throw std::invalid_argument(fmt::format("model spec '{}': missing {} (form: {})", spec, key, form));
  if (seen["mlp"]) s.mlp = mlp;
  require_heads_divide(spec, s.hidden, s.heads);
  return s;
}

std::string transformer_spec_string(const TransformerSpec& s) {
  std::string out = fmt::format("transformer:layers={},hidden={},heads={},seq={},vocab={}", s.layers, s.hidden,
                                s.heads, s.seq, s.vocab);
  if (s.mlp) out += fmt::format(",mlp={}", *s.mlp);
  if (s.tied) out += ",tied";
  if (s.attn == AttentionImpl::sdpa) out += ",attn=sdpa";
  return out;
}

ModelDescription describe_transformer(const TransformerSpec& spec, const std::string& name) {
  ModelDescription m;
  m.name = name.empty() ? transformer_spec_string(spec) : name;
  for (auto [key, v] : {std::pair{"layers", spec.layers}, {"hidden", spec.hidden}, {"heads", spec.heads},
                        {"seq", spec.seq}, {"vocab", spec.vocab}, {"mlp", spec.mlp.value_or(1)}})
    require_positive(m.name, key, v);
  require_heads_divide(m.name, spec.hidden, spec.heads);
  if (spec.tokens && (*spec.tokens <= 0 || *spec.tokens > spec.seq))
    throw std::invalid_argument(fmt::format("model {}: {} tokens per sample, outside 1..{} (the position table)",
                                            m.name, *spec.tokens, spec.seq));
  const std::int64_t s = spec.tokens.value_or(spec.seq), h = spec.hidden, a = spec.heads, v = spec.vocab;
  const std::int64_t f = spec.mlp.value_or(4 * h);
  const double sd = static_cast<double>(s), hd = static_cast<double>(h), ad = static_cast<double>(a),
               fd = static_cast<double>(f), vd = static_cast<double>(v);
  m.sample = fmt::format("a {}-token sequence", s);
  m.input_features = s;
  m.tokens_per_sample = static_cast<double>(s);
  m.sources = {"GPT-2 architecture (Radford et al. 2019; Hugging Face GPT2LMHeadModel parameter names and order)",
               "FLOPs from the GEMM shapes; activations after Korthikanti et al. 2022, arXiv:2205.05198, Sec. 4.1; "
               "counting conventions of scenarios/models/generate.py"};
  // Token and position lookups cost no FLOPs worth counting; their sum costs one
  // add per element, and embedding dropout saves a mask.
  const double sh = sd * hd, as2 = ad * sd * sd, sf = sd * fd;
  add_layer(m, "embeddings", "GPT2Embeddings", {{"wte.weight", {v, h}}, {"wpe.weight", {spec.seq, h}}}, kAdd * sd * hd,
            sd * hd / 4, s * h);
  set_traffic(m.layers.back(), {{kAddPasses, sh}, {kDropoutPasses, sh}});
  for (std::int64_t i = 0; i < spec.layers; ++i) {
    add_layer(m, fmt::format("h.{}", i), "GPT2Block",
              {{"ln_1.weight", {h}}, {"ln_1.bias", {h}}, {"attn.c_attn.weight", {h, 3 * h}},
               {"attn.c_attn.bias", {3 * h}}, {"attn.c_proj.weight", {h, h}}, {"attn.c_proj.bias", {h}},
               {"ln_2.weight", {h}}, {"ln_2.bias", {h}}, {"mlp.c_fc.weight", {h, f}}, {"mlp.c_fc.bias", {f}},
               {"mlp.c_proj.weight", {f, h}}, {"mlp.c_proj.bias", {h}}},
              gelu_block_flops(sd, hd, ad, fd) - softmax_flops(spec.attn, sd, ad),
              gelu_block_activations(sd, hd, ad, fd, spec.attn), s * h);
    set_attention(m.layers.back(), spec.attn, s, h, a, true);
    // Its weight GEMMs (rows per sample, n, k; Conv1D's [h, n] weights): c_attn, attn.c_proj,
    // mlp.c_fc, mlp.c_proj, as generate.py lists them.
    m.layers.back().gemms = {{s, 3 * h, h}, {s, h, h}, {s, f, h}, {s, h, f}};
    // Hugging Face GPT2Block, eager: two LayerNorms; the head split and merge made contiguous;
    // scores scaled and causal-masked, softmax, dropout; two dropouts and residual adds; the
    // eager gelu_new; two gradient sums (block input, mid residual); the Conv1D bias rows sums.
    // Under autocast: LayerNorms and softmax f32 (fp32 list; HF casts the probabilities back
    // to f16 before dropout), the residual adds and gradient sums f32 (the stream is f32),
    // gelu_new f32 from pow (fp32 list) on; the scale and mask, copies, dropouts, bias rows f16.
    // Under sdpa the score chain (scale, mask, softmax, dropout over a x s x s) runs inside the
    // fused kernel; the head split and merge copies are kept as eager's.
    if (spec.attn == AttentionImpl::sdpa)
      set_traffic(m.layers.back(), {{kLayerNormPasses, 2 * sh, kF32}, {kCopyPasses, 4 * sh}, {kDropoutPasses, 2 * sh},
                                    {kAddPasses, 2 * sh, kF32}, {kAccumulatePasses, 2 * sh, kF32},
                                    {kGeluEagerPasses, sf, kF32}, {kBiasGradPasses, 5 * sh + sf}});
    else
      set_traffic(m.layers.back(), {{kLayerNormPasses, 2 * sh, kF32}, {kCopyPasses, 4 * sh}, {kScalePasses, 2 * as2},
                                    {kSoftmaxPasses, as2, kF32}, {kDropoutPasses, as2}, {kDropoutPasses, 2 * sh},
                                    {kAddPasses, 2 * sh, kF32}, {kAccumulatePasses, 2 * sh, kF32},
                                    {kGeluEagerPasses, sf, kF32}, {kBiasGradPasses, 5 * sh + sf}});
    // Autocast casts: c_attn's and c_fc's f32 LayerNorm inputs, the probabilities cast back to the
    // value dtype (eager only), gelu_new's f32 output for c_proj (2sh + sf + as^2).
    set_casts(m.layers.back(), 2 * sh + sf + (spec.attn == AttentionImpl::sdpa ? 0.0 : as2));
  }
  // ln_f, then the LM head; the loss saves the logits, the head's weight gradient the ln_f output.
  std::vector<ParameterDescription> head{{"ln_f.weight", {h}}, {"ln_f.bias", {h}}};
  if (!spec.tied) head.push_back({"lm_head.weight", {v, h}});
  add_layer(m, "ln_f+lm_head", spec.tied ? "LayerNorm+TiedLinear" : "LayerNorm+Linear", std::move(head),
            kLayerNorm * sd * hd + 2 * sd * hd * vd, 2 * sd * hd + sd * vd, s * v);
  m.layers.back().gemms = {{s, v, h}};
  set_traffic(m.layers.back(), {{kLayerNormPasses, sh, kF32}});
  set_casts(m.layers.back(), sh);  // the head's f32 LayerNorm input
  return m;
}

ModelDescription describe_llama(const LlamaSpec& spec, const std::string& name) {
  ModelDescription m;
  m.name = name;
  for (auto [key, val] : {std::pair{"num_hidden_layers", spec.layers}, {"hidden_size", spec.hidden},
                          {"num_attention_heads", spec.heads}, {"num_key_value_heads", spec.kv_heads},
                          {"intermediate_size", spec.intermediate}, {"max_position_embeddings", spec.seq},
                          {"vocab_size", spec.vocab}})
    require_positive(name, key, val);
  require_heads_divide(name, spec.hidden, spec.heads);
  if (spec.heads % spec.kv_heads != 0)
    throw std::invalid_argument(fmt::format("model {}: num_key_value_heads={} does not divide num_attention_heads={}",
                                            name, spec.kv_heads, spec.heads));
  const std::int64_t s = spec.seq, h = spec.hidden, f = spec.intermediate, v = spec.vocab;
  const std::int64_t kv = spec.hidden / spec.heads * spec.kv_heads;  // width of k_proj and v_proj
  const double sd = static_cast<double>(s), hd = static_cast<double>(h), ad = static_cast<double>(spec.heads),
               fd = static_cast<double>(f), kvd = static_cast<double>(kv), vd = static_cast<double>(v);
  m.sample = fmt::format("a {}-token sequence", s);
  m.input_features = s;
  m.tokens_per_sample = static_cast<double>(s);
  m.sources = {"Llama architecture (Touvron et al. 2023; Hugging Face LlamaForCausalLM parameter names and order)",
               "FLOPs from the GEMM shapes; activations after Korthikanti et al. 2022 adapted to SwiGLU, RMSNorm, "
               "no dropout; counting conventions of scenarios/models/generate.py"};
  const double sh = sd * hd, skv = sd * kvd, as2 = ad * sd * sd, sf = sd * fd;
  add_layer(m, "embed_tokens", "Embedding", {{"embed_tokens.weight", {v, h}}}, 0, 0, s * h);
  set_traffic(m.layers.back(), {{kEmbeddingPasses, sh}});
  for (std::int64_t i = 0; i < spec.layers; ++i) {
    const double flops = 2 * sd * (2 * hd * hd + 2 * hd * kvd + 3 * hd * fd) + attention_flops(sd, hd, ad) +
                         2 * kLayerNorm * sd * hd + 4 * sd * fd + 2 * kAdd * sd * hd - softmax_flops(spec.attn, sd, ad);
    // Attention: its input, q, the output before o_proj (3sh), k and v (2 s kv) and
    // the softmax output as^2 (no dropout); SwiGLU: input sh, gate, up, silu(gate),
    // their product 4sf; the two RMSNorm inputs 2sh. Under sdpa the fused kernel's
    // log-sum-exp as in place of the softmax output (its output is o_proj's saved input:
    // gelu_block_activations).
    const double attention_saved = saves_scores(spec.attn) ? ad * sd * sd : ad * sd;
    const double acts = 6 * sd * hd + 2 * sd * kvd + attention_saved + 4 * sd * fd;
    add_layer(m, fmt::format("layers.{}", i), "LlamaDecoderLayer",
              {{"self_attn.q_proj.weight", {h, h}}, {"self_attn.k_proj.weight", {kv, h}},
               {"self_attn.v_proj.weight", {kv, h}}, {"self_attn.o_proj.weight", {h, h}},
               {"mlp.gate_proj.weight", {f, h}}, {"mlp.up_proj.weight", {f, h}}, {"mlp.down_proj.weight", {h, f}},
               {"input_layernorm.weight", {h}}, {"post_attention_layernorm.weight", {h}}},
              flops, acts, s * h);
    // repeat_kv gives every query head its k and v: one product per query head.
    set_attention(m.layers.back(), spec.attn, s, h, spec.heads, true);
    // Its weight GEMMs (rows per sample, n, k): q, k, v (kv wide), o, gate, up, down.
    m.layers.back().gemms = {{s, h, h}, {s, kv, h}, {s, kv, h}, {s, h, h}, {s, f, h}, {s, f, h}, {s, h, f}};
    // Two RMSNorms, rotary on q and k, the q, k, v head splits and the merge made contiguous,
    // scale, causal mask, softmax, two residual adds, five gradient sums, SiLU(gate) * up.
    // Under autocast: RMSNorm computes in f32 (LlamaRMSNorm casts to float32; the stream is
    // f32), the f32 causal mask promotes the scores, softmax runs in float32, residual adds and
    // gradient sums f32; rotary (cos and sin cast to q's dtype), copies, scale, SiLU, product f16.
    // Under sdpa the score chain (scale, mask, softmax) runs inside the fused kernel.
    if (spec.attn == AttentionImpl::sdpa)
      set_traffic(m.layers.back(), {{kRmsNormEagerPasses, 2 * sh, kF32}, {kRotaryEagerPasses, sh + skv},
                                    {kCopyPasses, 2 * sh + 2 * skv}, {kAddPasses, 2 * sh, kF32},
                                    {kAccumulatePasses, 5 * sh, kF32}, {kSiluPasses, sf}, {kMulPasses, sf}});
    else
      set_traffic(m.layers.back(), {{kRmsNormEagerPasses, 2 * sh, kF32}, {kRotaryEagerPasses, sh + skv},
                                    {kCopyPasses, 2 * sh + 2 * skv}, {kScalePasses, as2},
                                    {kBroadcastMaskAddPasses, as2, kF32}, {kSoftmaxPasses, as2, kF32},
                                    {kAddPasses, 2 * sh, kF32}, {kAccumulatePasses, 5 * sh, kF32}, {kSiluPasses, sf},
                                    {kMulPasses, sf}});
    // Autocast casts: q, k, v, gate and up each cast their f32 RMSNorm input; the float32
    // softmax's output cast back to the query dtype (eager only).
    set_casts(m.layers.back(), 5 * sh + (spec.attn == AttentionImpl::sdpa ? 0.0 : as2));
  }
  std::vector<ParameterDescription> head{{"norm.weight", {h}}};
  if (!spec.tied) head.push_back({"lm_head.weight", {v, h}});
  add_layer(m, "norm+lm_head", spec.tied ? "RMSNorm+TiedLinear" : "RMSNorm+Linear", std::move(head),
            kLayerNorm * sd * hd + 2 * sd * hd * vd, 2 * sd * hd + sd * vd, s * v);
  m.layers.back().gemms = {{s, v, h}};
  set_traffic(m.layers.back(), {{kRmsNormEagerPasses, sh, kF32}});
  set_casts(m.layers.back(), sh);  // the head's f32 RMSNorm input
  return m;
}

namespace {

// BERT and ViT share the encoder layer (post-LN in BERT, pre-LN in ViT; the same
// tensors either way): self-attention, output dense, intermediate and output.
std::vector<ParameterDescription> attention_params(const std::string& self, const std::string& out, std::int64_t h) {
  std::vector<ParameterDescription> p;
  for (const char* proj : {"query", "key", "value"})
    p.insert(p.end(), {{fmt::format("{}.{}.weight", self, proj), {h, h}}, {fmt::format("{}.{}.bias", self, proj), {h}}});
  p.insert(p.end(), {{out + ".dense.weight", {h, h}}, {out + ".dense.bias", {h}}});
  return p;
}

void append(std::vector<ParameterDescription>& to, std::vector<ParameterDescription> from) {
  to.insert(to.end(), from.begin(), from.end());
}

}  // namespace

ModelDescription describe_bert(const BertSpec& spec, const std::string& name) {
  ModelDescription m;
  m.name = name;
  for (auto [key, val] : {std::pair{"num_hidden_layers", spec.layers}, {"hidden_size", spec.hidden},
                          {"num_attention_heads", spec.heads}, {"intermediate_size", spec.intermediate},
                          {"max_position_embeddings", spec.seq}, {"vocab_size", spec.vocab},
                          {"type_vocab_size", spec.type_vocab}, {"tokens", spec.tokens.value_or(1)},
                          {"mlm_positions", spec.mlm_positions.value_or(1)}})
    require_positive(name, key, val);
  require_heads_divide(name, spec.hidden, spec.heads);
  if (spec.fused && spec.attn == AttentionImpl::sdpa)
    throw std::invalid_argument(fmt::format("model {}: NVIDIA's fused BERT layer runs its own attention kernels, "
                                            "not sdpa",
                                            name));
  const std::int64_t s = spec.tokens.value_or(spec.seq), h = spec.hidden, f = spec.intermediate, v = spec.vocab;
  const double sd = static_cast<double>(s), hd = static_cast<double>(h), ad = static_cast<double>(spec.heads),
               fd = static_cast<double>(f), vd = static_cast<double>(v);
  const char* heads_text = spec.head == BertHead::pretraining ? " (pre-training, MLM and NSP heads)"
                           : spec.head == BertHead::masked_lm    ? " (masked-LM head)"
                           : spec.head == BertHead::classification
                               ? " (sequence classification)"
                               : "";
  m.sample = fmt::format("a {}-token sequence{}", s, heads_text);
  m.input_features = s;
  m.tokens_per_sample = static_cast<double>(s);
  const char* class_name = spec.head == BertHead::pretraining      ? "BertForPreTraining"
                           : spec.head == BertHead::masked_lm      ? "BertForMaskedLM"
                           : spec.head == BertHead::classification ? "BertForSequenceClassification"
                                                                   : "BertModel with its pooler";
  m.sources = {std::string("BERT architecture (Devlin et al. 2018; Hugging Face ") + class_name +
                   " parameter names and order)",
               "FLOPs from the GEMM shapes; activations after Korthikanti et al. 2022, arXiv:2205.05198, Sec. 4.1; "
               "counting conventions of scenarios/models/generate.py"};
  add_layer(m, "embeddings", "BertEmbeddings",
            {{"word_embeddings.weight", {v, h}}, {"position_embeddings.weight", {spec.seq, h}},
             {"token_type_embeddings.weight", {spec.type_vocab, h}}, {"LayerNorm.weight", {h}},
             {"LayerNorm.bias", {h}}},
            2 * kAdd * sd * hd + kLayerNorm * sd * hd, 2 * sd * hd + sd * hd / 4, s * h);
  const double sh = sd * hd, as2 = ad * sd * sd, sf = sd * fd;
  set_traffic(m.layers.back(), {{kAddPasses, 2 * sh}, {kLayerNormPasses, sh}, {kDropoutPasses, sh}});
  for (std::int64_t i = 0; i < spec.layers; ++i) {
    auto params = attention_params("attention.self", "attention.output", h);
    append(params, {{"attention.output.LayerNorm.weight", {h}}, {"attention.output.LayerNorm.bias", {h}},
                    {"intermediate.dense.weight", {f, h}}, {"intermediate.dense.bias", {f}},
                    {"output.dense.weight", {h, f}}, {"output.dense.bias", {h}}, {"output.LayerNorm.weight", {h}},
                    {"output.LayerNorm.bias", {h}}});
    add_layer(m, fmt::format("encoder.layer.{}", i), "BertLayer", std::move(params),
              gelu_block_flops(sd, hd, ad, fd) - softmax_flops(spec.attn, sd, ad),
              gelu_block_activations(sd, hd, ad, fd, spec.attn), s * h);
    // Its weight GEMMs (rows per sample, n, k): query, key, value, attention output,
    // intermediate, output, as generate.py lists them.
    m.layers.back().gemms = {{s, h, h}, {s, h, h}, {s, h, h}, {s, h, h}, {s, f, h}, {s, h, f}};
    set_attention(m.layers.back(), spec.attn, s, h, spec.heads, false);
    // Under autocast: the f32 attention mask promotes the scores, so the mask add, softmax and
    // attention dropout are f32; the residual adds, LayerNorms and gradient sums f32; copies,
    // scale, hidden dropouts, GELU and bias rows f16, fused or not (DeepLearningExamples'
    // LinearActivation runs F.linear with its bias, then GELU, since its NVFuser release).
    if (spec.fused)
      set_traffic(m.layers.back(), {{kCopyPasses, sh}, {kSoftmaxChainFusedPasses, as2, kF32},
                                    {kDropoutAddLayerNormFusedPasses, 2 * sh, kF32}, {kGeluPasses, sf},
                                    {kAccumulatePasses, 4 * sh, kF32}, {kBiasGradPasses, 5 * sh + sf}});
    else if (spec.attn == AttentionImpl::sdpa)  // the score chain inside the fused kernel
      set_traffic(m.layers.back(), {{kCopyPasses, 4 * sh}, {kDropoutPasses, 2 * sh}, {kAddPasses, 2 * sh, kF32},
                                    {kLayerNormPasses, 2 * sh, kF32}, {kGeluPasses, sf},
                                    {kAccumulatePasses, 4 * sh, kF32}, {kBiasGradPasses, 5 * sh + sf}});
    else  // eager: head split and merge copies, the score chain kernel by kernel, GELU in one kernel
      set_traffic(m.layers.back(), {{kCopyPasses, 4 * sh}, {kScalePasses, as2}, {kMaskAddPasses, as2, kF32},
                                    {kSoftmaxPasses, as2, kF32}, {kDropoutPasses, as2, kF32},
                                    {kDropoutPasses, 2 * sh}, {kAddPasses, 2 * sh, kF32},
                                    {kLayerNormPasses, 2 * sh, kF32}, {kGeluPasses, sf},
                                    {kAccumulatePasses, 4 * sh, kF32}, {kBiasGradPasses, 5 * sh + sf}});
    // Autocast casts (eager; NVFuser folds them into its fused kernels): query, key and value
    // each cast the f32 layer input, the f32 probabilities meet the context matmul, the
    // intermediate dense takes the f32 LayerNorm output.
    if (!spec.fused) set_casts(m.layers.back(), 4 * sh + (spec.attn == AttentionImpl::sdpa ? 0.0 : as2));
  }
  if (spec.head == BertHead::pooler || spec.head == BertHead::classification) {
    // The pooler: dense and tanh on the first token; saves the dense input and the tanh output.
    add_layer(m, "pooler", "BertPooler", {{"pooler.dense.weight", {h, h}}, {"pooler.dense.bias", {h}}},
              2 * hd * hd + hd, 2 * hd, h);
    set_traffic(m.layers.back(), {{kGeluPasses, hd}, {kBiasGradPasses, hd}});  // tanh: one kernel, as GELU
    set_casts(m.layers.back(), hd);  // the f32 first token, cast for the dense
    if (spec.head == BertHead::pooler) return m;
    // Dropout, then the classifier on the pooled token: saves its input (and the dropout mask).
    require_positive(name, "num_labels", spec.labels);
    const double ld = static_cast<double>(spec.labels);
    add_layer(m, "classifier", "Linear", {{"classifier.weight", {spec.labels, h}}, {"classifier.bias", {spec.labels}}},
              2 * hd * ld + ld, hd + hd / 4, spec.labels);
    m.layers.back().gemms = {{1, spec.labels, h}};
    set_traffic(m.layers.back(), {{kDropoutPasses, hd}, {kBiasGradPasses, ld}});
    set_casts(m.layers.back(), hd);
    return m;
  }
  if (spec.head == BertHead::masked_lm) {
    // The masked-LM head on every position: dense, GELU, LayerNorm, then the decoder tied to
    // word_embeddings with its own bias (cls.predictions.bias, registered first).
    const double ph = sd * hd;
    std::vector<ParameterDescription> params = {
        {"cls.predictions.bias", {v}}, {"cls.predictions.transform.dense.weight", {h, h}},
        {"cls.predictions.transform.dense.bias", {h}}, {"cls.predictions.transform.LayerNorm.weight", {h}},
        {"cls.predictions.transform.LayerNorm.bias", {h}}};
    // Untied: the decoder's own weight, after the transform (its bias is cls.predictions.bias).
    if (!spec.tied) params.push_back({"cls.predictions.decoder.weight", {v, h}});
    add_layer(m, "cls", "BertOnlyMLMHead", std::move(params),
              2 * sd * hd * hd + kGelu * sd * hd + kLayerNorm * sd * hd + 2 * sd * hd * vd, 4 * sd * hd + sd * vd,
              s * v);
    m.layers.back().gemms = {{s, h, h}, {s, v, h}};  // transform dense, decoder
    set_traffic(m.layers.back(), {{kGeluPasses, ph}, {kLayerNormPasses, ph, kF32}});
    if (!spec.fused) set_casts(m.layers.back(), 2 * ph);  // the transform's and the decoder's f32 inputs
    return m;
  }
  // Pooler and NSP head, then the MLM head on p positions: dense, GELU, LayerNorm, decoder
  // tied to word_embeddings with its own bias.
  const std::int64_t p = spec.mlm_positions.value_or(s);
  const double pd = static_cast<double>(p), ph = pd * hd;
  std::vector<ParameterDescription> heads = {
      {"pooler.dense.weight", {h, h}}, {"pooler.dense.bias", {h}}, {"cls.predictions.bias", {v}},
      {"cls.predictions.transform.dense.weight", {h, h}}, {"cls.predictions.transform.dense.bias", {h}},
      {"cls.predictions.transform.LayerNorm.weight", {h}}, {"cls.predictions.transform.LayerNorm.bias", {h}}};
  if (!spec.tied) heads.push_back({"cls.predictions.decoder.weight", {v, h}});
  heads.push_back({"cls.seq_relationship.weight", {2, h}});
  heads.push_back({"cls.seq_relationship.bias", {2}});
  add_layer(m, "pooler+heads", "BertPreTrainingHeads", std::move(heads),
            2 * hd * hd + 2 * hd * 2 + 2 * pd * hd * hd + kGelu * pd * hd + kLayerNorm * pd * hd + 2 * pd * hd * vd,
            4 * pd * hd + pd * vd, p * v + 2);
  m.layers.back().gemms = {{1, h, h}, {p, h, h}, {p, v, h}};  // pooler, transform dense, decoder
  if (spec.mlm_positions)  // the masked rows index_selected; backward zero-fills s x h and adds p rows back
    set_traffic(m.layers.back(), {{kGeluPasses, ph}, {kLayerNormPasses, ph, kF32}, {Passes{2, 0}, ph, kF32},
                                  {Passes{0, 2}, ph, kF32}, {Passes{0, 1}, sh, kF32}});
  else
    set_traffic(m.layers.back(), {{kGeluPasses, ph}, {kLayerNormPasses, ph, kF32}});
  // Eager casts the f32 pooler input, the transform's f32 input and the decoder's f32
  // LayerNorm input (fused: folded into NVFuser's kernels).
  if (!spec.fused) set_casts(m.layers.back(), hd + 2 * ph);
  return m;
}

ModelDescription describe_vit(const VitSpec& spec, const std::string& name) {
  ModelDescription m;
  m.name = name;
  for (auto [key, val] : {std::pair{"num_hidden_layers", spec.layers}, {"hidden_size", spec.hidden},
                          {"num_attention_heads", spec.heads}, {"intermediate_size", spec.intermediate},
                          {"image_size", spec.image}, {"patch_size", spec.patch}, {"num_channels", spec.channels},
                          {"num_labels", spec.labels}})
    require_positive(name, key, val);
  require_heads_divide(name, spec.hidden, spec.heads);
  if (spec.image % spec.patch != 0)
    throw std::invalid_argument(
        fmt::format("model {}: patch_size={} does not divide image_size={}", name, spec.patch, spec.image));
  const std::int64_t h = spec.hidden, f = spec.intermediate, c = spec.channels, p = spec.patch;
  const std::int64_t patches = (spec.image / p) * (spec.image / p), s = patches + 1;  // plus the class token
  const double sd = static_cast<double>(s), hd = static_cast<double>(h), ad = static_cast<double>(spec.heads),
               fd = static_cast<double>(f), labels = static_cast<double>(spec.labels);
  m.sample = fmt::format("one {}x{} image, {} channels ({} tokens of {}x{} patches and a class token)", spec.image,
                         spec.image, c, s, p, p);
  m.input_features = c * spec.image * spec.image;
  m.sources = {"ViT architecture (Dosovitskiy et al. 2020; Hugging Face ViTForImageClassification parameter names "
               "and order)",
               "FLOPs from the GEMM and convolution shapes; activations after Korthikanti et al. 2022, Sec. 4.1; "
               "counting conventions of scenarios/models/generate.py"};
  // The patch projection (a stride-p convolution) saves the image; the position
  // add costs one FLOP per element; embedding dropout saves a mask.
  add_layer(m, "embeddings", "ViTEmbeddings",
            {{"cls_token", {1, 1, h}}, {"position_embeddings", {1, s, h}},
             {"patch_embeddings.projection.weight", {h, c, p, p}}, {"patch_embeddings.projection.bias", {h}}},
            2 * static_cast<double>(c * p * p * h * patches) + kAdd * sd * hd,
            static_cast<double>(m.input_features) + sd * hd / 4, s * h);
  const double sh = sd * hd, as2 = ad * sd * sd, sf = sd * fd;
  // The class token concatenated (a copy), the position add, embedding dropout.
  set_traffic(m.layers.back(), {{kCopyPasses, sh}, {kAddPasses, sh}, {kDropoutPasses, sh}});
  for (std::int64_t i = 0; i < spec.layers; ++i) {
    auto params = attention_params("attention.attention", "attention.output", h);
    append(params, {{"intermediate.dense.weight", {f, h}}, {"intermediate.dense.bias", {f}},
                    {"output.dense.weight", {h, f}}, {"output.dense.bias", {h}}, {"layernorm_before.weight", {h}},
                    {"layernorm_before.bias", {h}}, {"layernorm_after.weight", {h}}, {"layernorm_after.bias", {h}}});
    add_layer(m, fmt::format("encoder.layer.{}", i), "ViTLayer", std::move(params),
              gelu_block_flops(sd, hd, ad, fd) - softmax_flops(spec.attn, sd, ad),
              gelu_block_activations(sd, hd, ad, fd, spec.attn), s * h);
    set_attention(m.layers.back(), spec.attn, s, h, spec.heads, false);
    m.layers.back().gemms = {{s, h, h}, {s, h, h}, {s, h, h}, {s, h, h}, {s, f, h}, {s, h, f}};
    // Hugging Face ViTLayer, eager, as BERT's layer without the attention mask: two
    // LayerNorms, head split and merge copies, scale, softmax, dropout; two dropouts and
    // residual adds; GELU in one kernel; four gradient sums; six bias rows sums.
    // Under autocast as BERT's eager layer: softmax and attention dropout, residual adds,
    // LayerNorms and gradient sums f32; the rest f16.
    if (spec.attn == AttentionImpl::sdpa)  // the score chain inside the fused kernel
      set_traffic(m.layers.back(), {{kCopyPasses, 4 * sh}, {kDropoutPasses, 2 * sh}, {kAddPasses, 2 * sh, kF32},
                                    {kLayerNormPasses, 2 * sh, kF32}, {kGeluPasses, sf},
                                    {kAccumulatePasses, 4 * sh, kF32}, {kBiasGradPasses, 5 * sh + sf}});
    else
      set_traffic(m.layers.back(), {{kCopyPasses, 4 * sh}, {kScalePasses, as2}, {kSoftmaxPasses, as2, kF32},
                                    {kDropoutPasses, as2, kF32}, {kDropoutPasses, 2 * sh}, {kAddPasses, 2 * sh, kF32},
                                    {kLayerNormPasses, 2 * sh, kF32}, {kGeluPasses, sf},
                                    {kAccumulatePasses, 4 * sh, kF32}, {kBiasGradPasses, 5 * sh + sf}});
    // Autocast casts: query, key and value each cast the f32 layernorm_before output, the f32
    // probabilities meet the context matmul (eager only), the intermediate takes the f32
    // layernorm_after output.
    set_casts(m.layers.back(), 4 * sh + (spec.attn == AttentionImpl::sdpa ? 0.0 : as2));
  }
  // The final LayerNorm runs on every token (it saves its input); the classifier
  // reads the class token (it saves that h-vector).
  add_layer(m, "layernorm+classifier", "LayerNorm+Linear",
            {{"layernorm.weight", {h}}, {"layernorm.bias", {h}}, {"classifier.weight", {spec.labels, h}},
             {"classifier.bias", {spec.labels}}},
            kLayerNorm * sd * hd + 2 * hd * labels + labels, sd * hd + hd, spec.labels);
  m.layers.back().gemms = {{1, spec.labels, h}};  // the class token only
  set_traffic(m.layers.back(), {{kLayerNormPasses, sh, kF32}, {kBiasGradPasses, labels}});
  set_casts(m.layers.back(), hd);  // the f32 class token for the classifier
  return m;
}

}  // namespace dpt
