#include "engine/io/input_file.hpp"
#include "scenarios/scenario/model_hf_config.hpp"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/nn/model_transformer.hpp"

namespace dpt {
namespace {

using nlohmann::json;

// The largest value of each size this reader takes: the transformer bounds
// (model_transformer.hpp: every product of them stays below 10^18), and image sizes.
constexpr std::int64_t kMaxImage = 1 << 15;  // image and patch side, in pixels
constexpr std::int64_t kMaxChannels = 256;

std::int64_t max_of(const std::string& key) {
  static const std::pair<const char*, std::int64_t> bounds[] = {
      {"n_layer", kMaxTransformerLayers},
      {"num_hidden_layers", kMaxTransformerLayers},
      {"n_embd", kMaxTransformerHidden},
      {"hidden_size", kMaxTransformerHidden},
      {"n_head", kMaxTransformerHidden},
      {"num_attention_heads", kMaxTransformerHidden},
      {"num_key_value_heads", kMaxTransformerHidden},
      {"head_dim", kMaxTransformerHidden},
      {"n_inner", kMaxTransformerIntermediate},
      {"intermediate_size", kMaxTransformerIntermediate},
      {"n_positions", kMaxTransformerPositions},
      {"n_ctx", kMaxTransformerPositions},
      {"max_position_embeddings", kMaxTransformerPositions},
      {"vocab_size", kMaxTransformerVocab},
      {"type_vocab_size", kMaxTransformerVocab},
      {"num_labels", kMaxTransformerVocab},
      {"image_size", kMaxImage},
      {"patch_size", kMaxImage},
      {"num_channels", kMaxChannels},
  };
  for (const auto& [name, bound] : bounds)
    if (key == name) return bound;
  throw std::logic_error("model_hf_config: no bound for " + key);
}

// Typed field access with errors that name the file and the key.
class ConfigReader {
 public:
  ConfigReader(const json& j, std::string file) : j_(j), file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw std::invalid_argument(fmt::format("{}: {}: {}", file_, key, what));
  }
  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  std::int64_t get_int(const std::string& key) const {
    if (!has(key)) fail(key, "missing (this model family needs it)");
    const json& v = j_.at(key);
    if (!v.is_number_integer()) fail(key, fmt::format("expected an integer, got {}", v.dump()));
    // Bounded above here (an unsigned value beyond int64 included); zero and negative
    // values are left to describe_*'s "must be positive", which runs before any arithmetic.
    const std::int64_t hi = max_of(key);
    if ((v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) ||
        v.get<std::int64_t>() > hi)
      fail(key, fmt::format("{} is more than {}, the largest this reader models", v.dump(), hi));
    return v.get<std::int64_t>();
  }
  std::int64_t get_int(const std::string& key, std::int64_t fallback) const {
    return has(key) ? get_int(key) : fallback;
  }
  bool get_bool(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_boolean()) fail(key, fmt::format("expected true or false, got {}", v.dump()));
    return v.get<bool>();
  }
  bool architectures_include(const std::string& cls) const {
    if (!has("architectures")) return false;
    const json& v = j_.at("architectures");
    if (!v.is_array()) fail("architectures", "expected a list of class names");
    for (const auto& a : v)
      if (a.is_string() && a.get<std::string>() == cls) return true;
    return false;
  }
  const json& raw(const std::string& key) const { return j_.at(key); }

 private:
  const json& j_;
  std::string file_;
};

// How the model runs attention: the reference's `:attn=` suffix, else the config's
// attn_implementation (or _attn_implementation, as transformers keeps it), else "sdpa",
// transformers' default for these classes when PyTorch has scaled_dot_product_attention.
AttentionImpl attention_from(const ConfigReader& c, std::optional<AttentionImpl> given) {
  if (given) return *given;
  for (const char* key : {"attn_implementation", "_attn_implementation"}) {
    if (!c.has(key)) continue;
    const json& v = c.raw(key);
    if (!v.is_string()) c.fail(key, fmt::format("expected a string (eager, sdpa, flash_attention_2), got {}", v.dump()));
    const std::string value = v.get<std::string>();
    if (value == "eager") return AttentionImpl::eager;
    if (value == "sdpa" || value == "flash_attention_2") return AttentionImpl::sdpa;
    c.fail(key, fmt::format("'{}' is not an attention dptwin models (eager; sdpa, or flash_attention_2: the same "
                            "FlashAttention-2 kernels)",
                            value));
  }
  return AttentionImpl::sdpa;
}

// The training sequence a reference gives (`hf:PATH:seq=N`) against the config's position
// table `key` (`positions` rows): GPT-2's and BERT's learned tables have no row past it
// (PyTorch's embedding lookup fails there), so a longer sequence is refused.
std::optional<std::int64_t> sequence_within(const ConfigReader& c, const std::string& key, std::int64_t positions,
                                            std::optional<std::int64_t> seq) {
  if (seq && positions > 0 && *seq > positions)
    c.fail(key, fmt::format("the training sequence :seq={} is longer than the {} learned positions the model has "
                            "(give :seq= at most {})",
                            *seq, positions, positions));
  return seq;
}

// A family built as one transformers class: a config whose `architectures` names another
// (GPT2Model without the LM head, LlamaForSequenceClassification, ViTModel with a pooler)
// is refused, not built as that class with the wrong head. No `architectures`: the class.
void require_class(const ConfigReader& c, const std::string& built) {
  if (!c.has("architectures") || c.architectures_include(built)) return;
  const auto& list = c.raw("architectures");
  if (list.empty()) return;
  c.fail("architectures", fmt::format("{} is not a class this reader builds for this model_type (it builds {})",
                                      list.front().dump(), built));
}

// Config fields that add parameters or change the layer this reader does not model.
void refuse_unmodelled(const ConfigReader& c) {
  if (c.get_bool("add_cross_attention", false))
    c.fail("add_cross_attention", "true is not modelled (cross-attention layers in every block)");
  if (c.has("position_embedding_type")) {
    const json& v = c.raw("position_embedding_type");
    if (!v.is_string() || v.get<std::string>() != "absolute")
      c.fail("position_embedding_type",
             fmt::format("{} is not modelled (only \"absolute\": relative keys add distance embeddings)", v.dump()));
  }
}

// An activation key (Llama's and BERT's hidden_act, GPT-2's activation_function): a name
// transformers' ACT2FN knows, else an error naming the key (it was read as the family's
// usual activation whatever it said). None when the config does not set it.
std::optional<std::string> activation_from(const ConfigReader& c, const std::string& key) {
  if (!c.has(key)) return std::nullopt;
  // transformers' ACT2FN names but prelu (nn.PReLU holds a weight of its own).
  static const std::vector<std::string> known = {
      "silu", "swish", "gelu",   "gelu_new",   "gelu_fast", "gelu_pytorch_tanh", "gelu_accurate", "gelu_python",
      "gelu_10", "quick_gelu", "laplace", "linear", "relu", "relu2", "relu6", "leaky_relu", "mish", "sigmoid",
      "tanh"};
  const json& v = c.raw(key);
  if (!v.is_string() || std::find(known.begin(), known.end(), v.get<std::string>()) == known.end())
    c.fail(key, fmt::format("{} is not an activation this reader knows ({})", v.dump(), fmt::join(known, ", ")));
  return v.get<std::string>();
}

ModelDescription gpt2_from(const ConfigReader& c, const std::string& name, std::optional<std::int64_t> seq,
                           std::optional<AttentionImpl> attn) {
  require_class(c, "GPT2LMHeadModel");
  refuse_unmodelled(c);
  TransformerSpec s;
  s.layers = c.get_int("n_layer");
  s.hidden = c.get_int("n_embd");
  s.heads = c.get_int("n_head");
  const char* positions_key = c.has("n_positions") ? "n_positions" : "n_ctx";
  s.seq = c.get_int(positions_key);
  s.tokens = sequence_within(c, positions_key, s.seq, seq);
  s.vocab = c.get_int("vocab_size");
  if (c.has("n_inner")) s.mlp = c.get_int("n_inner");
  s.tied = c.get_bool("tie_word_embeddings", true);
  s.attn = attention_from(c, attn);
  (void)activation_from(c, "activation_function");  // gelu_new's traffic whichever: known names only
  return describe_transformer(s, name);
}

// Llama's rotary positions have no table: a training sequence longer than
// max_position_embeddings is allowed (transformers extends the rotary cache).
ModelDescription llama_from(const ConfigReader& c, const std::string& name, std::optional<std::int64_t> seq,
                            std::optional<AttentionImpl> attn) {
  require_class(c, "LlamaForCausalLM");
  for (const char* key : {"attention_bias", "mlp_bias"})
    if (c.get_bool(key, false)) c.fail(key, "true is not modelled (Llama's projections have no biases)");
  LlamaSpec s;
  s.layers = c.get_int("num_hidden_layers");
  s.hidden = c.get_int("hidden_size");
  s.heads = c.get_int("num_attention_heads");
  if (c.has("head_dim") && c.get_int("head_dim") <= 0)
    c.fail("head_dim", fmt::format("must be positive, got {}", c.get_int("head_dim")));
  if (c.has("head_dim") && s.heads > 0 && c.get_int("head_dim") * s.heads != s.hidden)
    c.fail("head_dim", fmt::format("{} x {} heads is not hidden_size {}: a head size other than hidden/heads is not "
                                   "modelled",
                                   c.get_int("head_dim"), s.heads, s.hidden));
  s.kv_heads = c.get_int("num_key_value_heads", s.heads);
  s.intermediate = c.get_int("intermediate_size");
  s.seq = seq ? *seq : c.get_int("max_position_embeddings");
  s.vocab = c.get_int("vocab_size");
  s.tied = c.get_bool("tie_word_embeddings", false);
  s.attn = attention_from(c, attn);
  ModelDescription m = describe_llama(s, name);
  // hidden_act: the gate's activation in act(gate) * up. Every elementwise activation
  // transformers knows reads the gate once and writes once, the traffic the block is costed
  // by (memory-bound on every GPU here), so another one costs as SiLU does.
  if (const auto act = activation_from(c, "hidden_act"); act && *act != "silu" && *act != "swish")
    m.sources.push_back(fmt::format("hidden_act {}: costed as SiLU is (one read of the gate and one write per "
                                    "element; its FLOPs do not bound the kernel)",
                                    *act));
  return m;
}

// The classes of a classification head: id2label's size, else num_labels, else
// transformers' PretrainedConfig default, 2.
std::int64_t labels_from(const ConfigReader& c) {
  if (!c.has("id2label")) return c.get_int("num_labels", 2);
  if (!c.raw("id2label").is_object()) c.fail("id2label", "expected a map from class index to label");
  const auto labels = static_cast<std::int64_t>(c.raw("id2label").size());
  if (labels > kMaxTransformerVocab)
    c.fail("id2label", fmt::format("{} classes, more than {}, the largest this reader models", labels,
                                   kMaxTransformerVocab));
  return labels;
}

// The head `architectures` names (BertModel when it names none). A BERT class this reader
// does not build is refused, not read as another (BertForMaskedLM has no pooler and a
// masked-LM head: read as BertModel it lost 24.6 GFLOP per 512-token sample).
BertHead bert_head_from(const ConfigReader& c) {
  if (!c.has("architectures")) return BertHead::pooler;
  const std::vector<std::pair<std::string, BertHead>> known = {
      {"BertModel", BertHead::pooler},
      {"BertForPreTraining", BertHead::pretraining},
      {"BertForMaskedLM", BertHead::masked_lm},
      {"BertForSequenceClassification", BertHead::classification}};
  for (const auto& [cls, head] : known)
    if (c.architectures_include(cls)) return head;
  const auto& list = c.raw("architectures");
  if (!list.empty())
    c.fail("architectures", fmt::format("{} is not a class this reader builds (BertModel, BertForPreTraining, "
                                        "BertForMaskedLM, BertForSequenceClassification)",
                                        list.front().dump()));
  return BertHead::pooler;
}

ModelDescription bert_from(const ConfigReader& c, const std::string& name, std::optional<std::int64_t> seq,
                           std::optional<AttentionImpl> attn) {
  refuse_unmodelled(c);
  BertSpec s;
  s.layers = c.get_int("num_hidden_layers");
  s.hidden = c.get_int("hidden_size");
  s.heads = c.get_int("num_attention_heads");
  s.intermediate = c.get_int("intermediate_size");
  s.seq = c.get_int("max_position_embeddings");
  s.tokens = sequence_within(c, "max_position_embeddings", s.seq, seq);
  s.vocab = c.get_int("vocab_size");
  s.type_vocab = c.get_int("type_vocab_size", 2);
  s.head = bert_head_from(c);
  s.tied = c.get_bool("tie_word_embeddings", true);  // the masked-LM decoder's weight (an outside-user review)
  if (s.head == BertHead::classification) s.labels = labels_from(c);
  s.attn = attention_from(c, attn);
  (void)activation_from(c, "hidden_act");  // GELU's traffic whichever: known names only
  return describe_bert(s, name);
}

ModelDescription vit_from(const ConfigReader& c, const std::string& name, std::optional<AttentionImpl> attn) {
  require_class(c, "ViTForImageClassification");
  if (!c.get_bool("qkv_bias", true)) c.fail("qkv_bias", "false is not modelled (query, key and value have biases)");
  VitSpec s;
  s.layers = c.get_int("num_hidden_layers");
  s.hidden = c.get_int("hidden_size");
  s.heads = c.get_int("num_attention_heads");
  s.intermediate = c.get_int("intermediate_size");
  s.image = c.get_int("image_size");
  s.patch = c.get_int("patch_size");
  s.channels = c.get_int("num_channels", 3);
  // A sample is (image / patch)^2 patch tokens and the class token, bounded as a text
  // model's positions are.
  const std::int64_t tokens = s.image > 0 && s.patch > 0 ? (s.image / s.patch) * (s.image / s.patch) + 1 : 0;
  if (tokens > kMaxTransformerPositions)
    c.fail("patch_size", fmt::format("image_size {} in patches of {} is {} tokens, more than {}, the largest this "
                                     "reader models",
                                     s.image, s.patch, tokens, kMaxTransformerPositions));
  s.labels = labels_from(c);
  s.attn = attention_from(c, attn);
  return describe_vit(s, name);
}

}  // namespace

ModelDescription parse_hf_config(const std::string& json_text, const std::string& file_label,
                                 const std::string& model_name, std::optional<std::int64_t> seq,
                                 std::optional<AttentionImpl> attn) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    // parse_error for bad syntax, and out_of_range (406) for a number beyond a double,
    // e.g. 1e400: both are the file's fault.
    throw std::invalid_argument(fmt::format("{}: not valid JSON: {}", file_label, e.what()));
  }
  if (!j.is_object()) throw std::invalid_argument(fmt::format("{}: expected a JSON object (a config.json)", file_label));
  const ConfigReader c(j, file_label);
  if (seq && (*seq < 1 || *seq > kMaxTransformerPositions))
    throw std::invalid_argument(fmt::format("{}: seq: {} is not a number of tokens in 1..{}", model_name, *seq,
                                            kMaxTransformerPositions));
  if (!c.has("model_type") || !j.at("model_type").is_string())
    c.fail("model_type", "missing: a Hugging Face config.json names its family in model_type");
  const std::string type = j.at("model_type").get<std::string>();
  ModelDescription m;
  try {
    if (type == "gpt2") m = gpt2_from(c, model_name, seq, attn);
    else if (type == "llama") m = llama_from(c, model_name, seq, attn);
    else if (type == "bert") m = bert_from(c, model_name, seq, attn);
    else if (type == "vit" && seq)
      c.fail("model_type", fmt::format("vit: a sample is one image (image_size, patch_size), not a sequence; "
                                       "drop :seq={}", *seq));
    else if (type == "vit") m = vit_from(c, model_name, attn);
    else
      c.fail("model_type", fmt::format("'{}' is not a family this reader knows (gpt2, llama, bert, vit)", type));
    validate_model_description(m);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    if (what.rfind(file_label, 0) == 0) throw;
    throw std::invalid_argument(fmt::format("{}: {}", file_label, what));
  }
  m.sources.insert(m.sources.begin(), fmt::format("Hugging Face config.json ({}), model_type {}", file_label, type));
  if (!attn)
    for (const char* key : {"attn_implementation", "_attn_implementation"})
      if (c.has(key) && j.at(key) == "flash_attention_2") m.flash_attention_2 = true;
  return m;
}

HfReference parse_hf_reference(const std::string& reference) {
  HfReference out{reference, std::nullopt, std::nullopt};
  std::string rest = reference;
  // Peel the known suffixes off the end, each at most once, in either order.
  for (int peeled = 0; peeled < 2; ++peeled) {
    const auto seq_at = rest.rfind(":seq="), attn_at = rest.rfind(":attn=");
    const bool seq_last = seq_at != std::string::npos && (attn_at == std::string::npos || seq_at > attn_at);
    if (seq_last && !out.seq) {
      const std::string digits = rest.substr(seq_at + 5);
      const bool whole = !digits.empty() && digits.size() <= 9 &&
                         digits.find_first_not_of("0123456789") == std::string::npos;
      const std::int64_t tokens = whole ? std::stoll(digits) : 0;
      if (!whole || tokens < 1 || tokens > kMaxTransformerPositions)
        throw std::invalid_argument(fmt::format("hf:{}: seq: '{}' is not a number of tokens in 1..{} (hf:PATH:seq=N, "
                                                "e.g. hf:config.json:seq=4096)",
                                                reference, digits, kMaxTransformerPositions));
      out.seq = tokens;
      rest = rest.substr(0, seq_at);
    } else if (!seq_last && attn_at != std::string::npos && !out.attn) {
      out.attn = parse_attention_impl(rest.substr(attn_at + 6), "hf:" + reference);
      rest = rest.substr(0, attn_at);
    } else {
      if ((seq_last && out.seq) || (!seq_last && attn_at != std::string::npos && out.attn))
        throw std::invalid_argument(fmt::format("hf:{}: {} given twice", reference, seq_last ? ":seq=" : ":attn="));
      break;
    }
  }
  out.path = rest;
  return out;
}

ModelDescription load_hf_config(const std::string& reference) {
  auto [path, seq, attn] = parse_hf_reference(reference);
  // A model folder, as from_pretrained takes it: its config.json (an outside-user review gave
  // the folder and read "cannot be read (no such file, or not a file)").
  if (std::error_code dir_ec; std::filesystem::is_directory(path, dir_ec)) {
    if (!std::filesystem::exists(path / "config.json", dir_ec))
      throw std::invalid_argument(fmt::format("hf:{}: {} is a folder without a config.json (give the config file, or "
                                              "the folder from_pretrained reads)",
                                              reference, path.string()));
    path /= "config.json";
  }
  // A suffix other than :seq=N reads as part of the file name: say so where it is missing.
  std::error_code ec;
  const std::string name = path.string();
  const auto colon = name.rfind(':');
  if (colon != std::string::npos && name.find('/', colon) == std::string::npos && !std::filesystem::exists(path, ec))
    throw std::invalid_argument(fmt::format("hf:{}: no such file; '{}' is not a suffix this reader knows (hf:PATH, "
                                            "hf:PATH:seq=N, hf:PATH:attn=eager|sdpa)",
                                            reference, name.substr(colon)));
  require_regular_input(path, "hf config " + path.string());
  std::ifstream in(path);
  if (!in || std::filesystem::is_directory(path))
    throw std::invalid_argument(fmt::format("hf config {} cannot be read (no such file, or not a file)",
                                            path.string()));
  std::stringstream text;
  text << in.rdbuf();
  return parse_hf_config(text.str(), path.string(), "hf:" + reference, seq, attn);
}

}  // namespace dpt
