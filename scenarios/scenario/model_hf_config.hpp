// Hugging Face config.json as a model description: the GPT-2, Llama, BERT and
// ViT families, chosen by the file's model_type, with parameter names and
// shapes as transformers registers them (see engine/nn/model_transformer.hpp).
//   gpt2  GPT2LMHeadModel (n_layer, n_embd, n_head, n_positions or n_ctx,
//         vocab_size, n_inner, tie_word_embeddings default true)
//   llama LlamaForCausalLM (num_key_value_heads default num_attention_heads,
//         tie_word_embeddings default false)
//   bert  BertModel with its pooler, or the class `architectures` names:
//         BertForPreTraining, BertForMaskedLM or BertForSequenceClassification
//         (classes: id2label's size, else num_labels, else 2); another class is
//         refused (type_vocab_size default 2)
//   vit   ViTForImageClassification (classes: id2label's size, else num_labels,
//         else transformers' default 2; num_channels default 3, qkv_bias default true)
// A sample is one sequence of max_position_embeddings (n_positions) tokens, or
// one image. Fields the model's shapes do not depend on are ignored.
#pragma once
#include <filesystem>
#include <string>

#include "engine/nn/model_library.hpp"

namespace dpt {

// Errors are std::invalid_argument naming the file and the key (a missing or
// non-integer field, an unknown model_type with the families this reads).
ModelDescription parse_hf_config(const std::string& json_text, const std::string& file_label,
                                 const std::string& model_name);
// Reads the file; the model is named "hf:PATH".
ModelDescription load_hf_config(const std::filesystem::path& path);

}  // namespace dpt
