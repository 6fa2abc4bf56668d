// Transformer descriptions from hyperparameters: the parametric GPT-2-style
// decoder (`transformer:layers=24,hidden=1024,heads=16,seq=1024,vocab=50257`) and
// the Hugging Face families the config.json reader knows (GPT-2, Llama, BERT,
// ViT). Each builder gives the parameters exactly as the reference
// implementation registers them (names, shapes, order) and per-layer FLOPs and
// saved activations under the counting conventions of scenarios/models/generate.py
// (a multiply-add is 2 FLOPs; element-wise work as engine/core/kernels.cpp charges
// it; activations after Korthikanti et al. 2022, Sec. 4.1, dropout masks a quarter
// of an element; memory-bound traffic kernel by kernel, generate.py's MB_* passes). Built
// from the same hyperparameters, they reproduce the library's gpt2-124m, gpt2-1.5b,
// bert-large, bert-large-dle-phase2 and llama-2-7b files exactly.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "engine/nn/model_library.hpp"

namespace dpt {

// How a transformer runs its attention (transformers' attn_implementation):
//  - eager: the batched matmuls QK^T and scores x V (LayerDescription::bmms), with the scale,
//    mask, softmax and dropout kernels between them over every s x s score; the
//    probabilities and the attention dropout mask are saved for backward;
//  - sdpa: one fused kernel of torch.nn.functional.scaled_dot_product_attention
//    (LayerDescription::sdpa): no s x s tensor is written or saved; it saves its output and a
//    log-sum-exp per query and head, and its backward recomputes the scores. Causal in
//    GPT-2 and Llama (is_causal), with an attention mask in BERT (the memory-efficient
//    kernel), neither in ViT.
enum class AttentionImpl { eager, sdpa };
// Reads "eager" or "sdpa" (also transformers' "flash_attention_2", the same FlashAttention-2
// kernels PyTorch's sdpa runs); throws std::invalid_argument naming `where`, the value and
// the choices.
AttentionImpl parse_attention_impl(const std::string& value, const std::string& where);

// GPT-2 (GPT2LMHeadModel): learned positions, pre-LayerNorm blocks with a GELU
// MLP, final LayerNorm and an LM head, tied to the token embedding or its own.
struct TransformerSpec {
  std::int64_t layers = 0;  // blocks (n_layer)
  std::int64_t hidden = 0;  // model width (n_embd)
  std::int64_t heads = 0;   // attention heads (n_head); must divide hidden
  std::int64_t seq = 0;     // the position table's size (n_positions), and tokens per sample unless `tokens`
  std::int64_t vocab = 0;   // vocabulary size
  std::optional<std::int64_t> mlp;  // MLP inner width (n_inner); none: 4 x hidden
  bool tied = false;                // LM head shares the token embedding (no lm_head.weight)
  // Tokens per sample when training sequences are shorter than the position table (at most
  // `seq`: GPT-2's learned table has no row past it); none: seq.
  std::optional<std::int64_t> tokens;
  AttentionImpl attn = AttentionImpl::eager;  // `attn=sdpa` in the spec string
};

// The largest value of each size a transformer description takes (the spec below and
// Hugging Face config.json files). Shapes, FLOPs and activations are products of these
// (e.g. 4 x seq^2 x hidden for attention, 2 x seq x hidden x vocab for the LM head), in
// 64-bit integers and rounded from doubles: with every size at its bound each product stays
// below 10^18, so none can overflow. Published models sit far inside them (Llama 3.1 405B:
// 126 layers, hidden 16384, intermediate 53248, vocab 128256, 131072 positions).
inline constexpr std::int64_t kMaxTransformerLayers = 1024;
inline constexpr std::int64_t kMaxTransformerHidden = 1 << 16;        // hidden size, heads, head size
inline constexpr std::int64_t kMaxTransformerIntermediate = 1 << 18;  // MLP width
inline constexpr std::int64_t kMaxTransformerPositions = 1 << 20;     // tokens in a sample
inline constexpr std::int64_t kMaxTransformerVocab = 1 << 22;         // vocabulary, token types, classes

// Parses "transformer:layers=L,hidden=H,heads=A,seq=S,vocab=V[,mlp=F][,tied][,attn=sdpa]";
// throws std::invalid_argument naming the spec and the key that is wrong.
TransformerSpec parse_transformer_spec(const std::string& spec);
// The spec in the canonical form parse_transformer_spec reads.
std::string transformer_spec_string(const TransformerSpec& s);
// `name` empty: the canonical spec string.
ModelDescription describe_transformer(const TransformerSpec& s, const std::string& name = "");

// Llama (LlamaForCausalLM): RMSNorm, rotary positions (no parameters), grouped
// query attention without biases, SwiGLU MLP, untied LM head unless `tied`.
struct LlamaSpec {
  // seq: tokens per sample (rotary positions have no table, so no parameter depends on it)
  std::int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, intermediate = 0, seq = 0, vocab = 0;
  bool tied = false;
  AttentionImpl attn = AttentionImpl::eager;
};
ModelDescription describe_llama(const LlamaSpec& s, const std::string& name);

// What sits on BERT's encoder, as the transformers class of that name builds it.
enum class BertHead {
  pooler,          // BertModel: the pooler (dense and tanh on the first token)
  pretraining,     // BertForPreTraining: pooler, masked-LM head tied to the word embeddings, next-sentence head
  masked_lm,       // BertForMaskedLM: the masked-LM head alone (no pooler)
  classification,  // BertForSequenceClassification: pooler, then a Linear to `labels` classes
};
// BERT: BertModel with its pooler, or one of the heads above.
struct BertSpec {
  std::int64_t layers = 0, hidden = 0, heads = 0, intermediate = 0, seq = 0, vocab = 0, type_vocab = 0;
  BertHead head = BertHead::pooler;
  // Tokens per sample when batches are shorter than the position table (`seq`): the mean
  // padded length of binned or bucketed data; none: seq.
  std::optional<std::int64_t> tokens;
  // The MLM head on this many positions per sample (NVIDIA's dense sequence output: the
  // masked positions only); none: every position, as Hugging Face computes it.
  std::optional<std::int64_t> mlm_positions;
  // NVIDIA DeepLearningExamples' TorchScript + NVFuser layer: one kernel for scale, mask,
  // softmax and dropout, one per dropout + residual add + LayerNorm, q, k, v as strided views.
  bool fused = false;
  // BertForSequenceClassification's classes (num_labels).
  std::int64_t labels = 2;
  AttentionImpl attn = AttentionImpl::eager;  // sdpa: not with `fused` (NVFuser's own kernels)
  // The masked-LM decoder shares word_embeddings (tie_word_embeddings, transformers' default);
  // false gives it a weight of its own, cls.predictions.decoder.weight [vocab, hidden].
  bool tied = true;
};
ModelDescription describe_bert(const BertSpec& s, const std::string& name);

// ViT (ViTForImageClassification): patch embedding, class token, learned
// positions, pre-LayerNorm encoder, final LayerNorm, linear classifier.
struct VitSpec {
  std::int64_t layers = 0, hidden = 0, heads = 0, intermediate = 0, image = 0, patch = 0, channels = 0;
  std::int64_t labels = 0;  // classifier outputs
  AttentionImpl attn = AttentionImpl::eager;
};
ModelDescription describe_vit(const VitSpec& s, const std::string& name);

}  // namespace dpt
