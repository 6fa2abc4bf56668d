// Hugging Face config.json as a model description: the GPT-2, Llama, BERT and
// ViT families, chosen by the file's model_type, with parameter names and
// shapes as transformers registers them (see engine/nn/model_transformer.hpp).
//   gpt2  GPT2LMHeadModel (n_layer, n_embd, n_head, n_positions or n_ctx,
//         vocab_size, n_inner, tie_word_embeddings default true)
//   llama LlamaForCausalLM (num_key_value_heads default num_attention_heads,
//         tie_word_embeddings default false)
// (gpt2, llama and vit: a config whose `architectures` names another class is refused;
// add_cross_attention and relative position embeddings are refused)
//   bert  BertModel with its pooler, or the class `architectures` names:
//         BertForPreTraining, BertForMaskedLM or BertForSequenceClassification
//         (classes: id2label's size, else num_labels, else 2); another class is
//         refused (type_vocab_size default 2)
//   vit   ViTForImageClassification (classes: id2label's size, else num_labels,
//         else transformers' default 2; num_channels default 3, qkv_bias default true)
// A sample is one sequence of max_position_embeddings (n_positions) tokens, or the
// training sequence a reference names (`hf:PATH:seq=N`: GPT-2 and BERT keep their
// position table and take at most that many; Llama's rotary positions take any), or
// one image (ViT refuses :seq=). Fields the model's shapes do not depend on are ignored.
// Attention runs as transformers runs it by default for these classes,
// scaled_dot_product_attention ("sdpa": fused kernels, no s x s tensor saved), unless the
// config's attn_implementation (or _attn_implementation) or a `:attn=eager|sdpa` suffix
// says otherwise (model_transformer.hpp, AttentionImpl).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "engine/nn/model_library.hpp"
#include "engine/nn/model_transformer.hpp"

namespace dpt {

// Errors are std::invalid_argument naming the file and the key (a missing or
// non-integer field, an unknown model_type with the families this reads).
// `seq`: tokens per sample in place of the config's positions (see above).
ModelDescription parse_hf_config(const std::string& json_text, const std::string& file_label,
                                 const std::string& model_name, std::optional<std::int64_t> seq = std::nullopt,
                                 std::optional<AttentionImpl> attn = std::nullopt);

// What follows "hf:": the config's path, the training sequence of a ":seq=N" suffix and the
// attention of an ":attn=eager|sdpa" suffix (either order, each at most once).
struct HfReference {
  std::filesystem::path path;
  std::optional<std::int64_t> seq;
  std::optional<AttentionImpl> attn;
};
// Throws std::invalid_argument naming the reference when the suffix is not a number of
// tokens in 1..kMaxTransformerPositions.
HfReference parse_hf_reference(const std::string& reference);
// Reads "PATH[:seq=N][:attn=eager|sdpa]"; the model is named "hf:" + reference.
ModelDescription load_hf_config(const std::string& reference);

}  // namespace dpt
