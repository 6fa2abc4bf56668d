// Parametric transformers, Hugging Face config.json files and the model file
// writer: exact parameter names and counts against published figures and against
// the library files that scenarios/models/generate.py (an independent Python
// implementation) wrote from the same hyperparameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "engine/core/fault_injection.hpp"
#include "engine/nn/model_transformer.hpp"
#include "scenarios/scenario/model_hf_config.hpp"
#include "scenarios/scenario/model_library_yaml.hpp"
#include "sim/twin/sim_device.hpp"
#include "verify/support/profile_text.hpp"

namespace dpt {
using test::profile_yaml;
namespace {

namespace fs = std::filesystem;

const fs::path kModels = fs::path(DPT_SOURCE_DIR) / "scenarios" / "models";
ModelDescription library(const std::string& name) { return load_model(name, kModels); }
ModelDescription hf(const std::string& dir) { return load_model("hf:" + (kModels / "hf" / dir / "config.json").string(), kModels); }
// The config of `dir` with a reference suffix (":attn=eager", ":seq=128").
ModelDescription hf_as(const std::string& dir, const std::string& suffix) {
  return load_model("hf:" + (kModels / "hf" / dir / "config.json").string() + suffix, kModels);
}

// Whether two descriptions count the same memory-bound traffic in every layer (both passes),
// the same autocast-f32 share of it and the same autocast casts.
bool same_traffic(const ModelDescription& a, const ModelDescription& b) {
  if (a.layers.size() != b.layers.size()) return false;
  for (size_t i = 0; i < a.layers.size(); ++i)
    if (a.layers[i].memory_bound_forward_elements_per_sample != b.layers[i].memory_bound_forward_elements_per_sample ||
        a.layers[i].memory_bound_backward_elements_per_sample != b.layers[i].memory_bound_backward_elements_per_sample ||
        a.layers[i].memory_bound_forward_f32_elements_per_sample !=
            b.layers[i].memory_bound_forward_f32_elements_per_sample ||
        a.layers[i].memory_bound_backward_f32_elements_per_sample !=
            b.layers[i].memory_bound_backward_f32_elements_per_sample ||
        a.layers[i].autocast_forward_cast_elements_per_sample != b.layers[i].autocast_forward_cast_elements_per_sample ||
        a.layers[i].autocast_backward_cast_elements_per_sample != b.layers[i].autocast_backward_cast_elements_per_sample)
      return false;
  return true;
}

// Invariant: two descriptions of one architecture agree layer by layer on every
// field the twin uses (names, types, parameter names and shapes in order, FLOPs,
// activations, output sizes, counted memory-bound traffic). Shown to fail on planted
// bugs: GELU counted as 11 FLOPs in model_transformer.cpp breaks
// GptFromTheSpecEqualsTheLibrary and FamiliesEqualTheLibraryModelsOfTheSameConfig;
// Fault::spec_transformer_traffic_uncounted breaks the traffic (SpecTransformersCount...).
void expect_same_layers(const ModelDescription& a, const ModelDescription& b) {
  EXPECT_TRUE(same_traffic(a, b)) << a.name << " and " << b.name << " count different memory-bound traffic";
  EXPECT_EQ(a.input_features, b.input_features);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const auto& x = a.layers[i];
    const auto& y = b.layers[i];
    SCOPED_TRACE(x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.forward_flops_per_sample, y.forward_flops_per_sample);
    EXPECT_EQ(x.activation_elements_per_sample, y.activation_elements_per_sample);
    EXPECT_EQ(x.output_features, y.output_features);
    ASSERT_EQ(x.gemms.size(), y.gemms.size());
    for (size_t j = 0; j < x.gemms.size(); ++j)
      EXPECT_TRUE(x.gemms[j].rows_per_sample == y.gemms[j].rows_per_sample && x.gemms[j].n == y.gemms[j].n &&
                  x.gemms[j].k == y.gemms[j].k)
          << "GEMM " << j;
    ASSERT_EQ(x.bmms.size(), y.bmms.size());
    for (size_t j = 0; j < x.bmms.size(); ++j)
      EXPECT_TRUE(x.bmms[j].count == y.bmms[j].count && x.bmms[j].m == y.bmms[j].m && x.bmms[j].n == y.bmms[j].n &&
                  x.bmms[j].k == y.bmms[j].k)
          << "batched matmul " << j;
    ASSERT_EQ(x.parameters.size(), y.parameters.size());
    for (size_t j = 0; j < x.parameters.size(); ++j) {
      EXPECT_EQ(x.parameters[j].name, y.parameters[j].name);
      EXPECT_EQ(x.parameters[j].shape, y.parameters[j].shape) << x.parameters[j].name;
    }
  }
}

// ---- the parametric transformer -------------------------------------------------

TEST(Parametric, GptFromTheSpecEqualsTheLibrary) {
  const auto small = load_model("transformer:layers=12,hidden=768,heads=12,seq=1024,vocab=50257,tied", kModels);
  EXPECT_EQ(model_parameter_count(small), 124'439'808);  // published: Hugging Face gpt2
  expect_same_layers(small, library("gpt2-124m"));
  const auto xl = load_model("transformer:layers=48,hidden=1600,heads=25,seq=1024,vocab=50257,tied", kModels);
  EXPECT_EQ(model_parameter_count(xl), 1'557'611'200);  // published: Hugging Face gpt2-xl
  expect_same_layers(xl, library("gpt2-1.5b"));
}

// Invariant: a spec-built or config.json transformer counts its layers' memory-bound traffic
// kernel by kernel, as the library's generator does (scenarios/models/generate.py, an
// independent implementation): every layer carries a count, and GPT-2, BERT-large and
// Llama-2-7B equal the library files to the element (FamiliesEqualTheLibraryModels...). Planted bug: Fault::spec_transformer_traffic_uncounted
// (the builders leave the saved-activation estimate) and the comparison fails.
TEST(Parametric, SpecTransformersCountTheirMemoryTraffic) {
  const std::string gpt2 = "transformer:layers=12,hidden=768,heads=12,seq=1024,vocab=50257,tied";
  for (const auto& m :
       {load_model(gpt2, kModels), hf("vit-base-patch16-224"), hf("bert-base-uncased"), hf("llama-2-7b")})
    for (const auto& l : m.layers) {
      EXPECT_TRUE(l.memory_bound_forward_elements_per_sample.has_value()) << m.name << " " << l.name;
      EXPECT_TRUE(l.memory_bound_backward_elements_per_sample.has_value()) << m.name << " " << l.name;
    }
  EXPECT_TRUE(same_traffic(load_model(gpt2, kModels), library("gpt2-124m")));
  const ScopedFault planted(Fault::spec_transformer_traffic_uncounted);
  EXPECT_FALSE(same_traffic(load_model(gpt2, kModels), library("gpt2-124m")));
  EXPECT_FALSE(load_model(gpt2, kModels).layers[1].memory_bound_forward_elements_per_sample.has_value());
}

// NVIDIA DeepLearningExamples' phase-2 BERT (binned to 288 tokens, MLM head on 38 masked
// positions, NVFuser's fused kernels) built from its spec equals the library file the
// Python generator wrote, FLOPs, activations and traffic; its position table stays 512.
TEST(Parametric, BertDeepLearningExamplesPhase2EqualsTheLibrary) {
  BertSpec spec{24, 1024, 16, 4096, 512, 30522, 2, BertHead::pretraining, 288, 38, true};
  const auto m = describe_bert(spec, "bert-large-dle-phase2");
  EXPECT_EQ(model_parameter_count(m), 336'226'108);  // published: Hugging Face bert-large-uncased
  expect_same_layers(m, library("bert-large-dle-phase2"));
  EXPECT_EQ(m.layers.front().parameters[1].shape, (Shape{512, 1024}));
  // The fused layer moves fewer elements than the eager one at the same length.
  spec.fused = false;
  const auto eager = describe_bert(spec, "eager");
  EXPECT_LT(*m.layers[1].memory_bound_forward_elements_per_sample, *eager.layers[1].memory_bound_forward_elements_per_sample);
}

TEST(Parametric, UntiedHeadAndMlpWidthChangeExactlyTheirTensors) {
  const auto tied = load_model("transformer:layers=12,hidden=768,heads=12,seq=1024,vocab=50257,tied", kModels);
  const auto untied = load_model("transformer:layers=12,hidden=768,heads=12,seq=1024,vocab=50257", kModels);
  // An untied head adds lm_head.weight [vocab, hidden] and nothing else.
  EXPECT_EQ(model_parameter_count(untied), 124'439'808 + 50'257 * 768);
  EXPECT_EQ(untied.layers.back().parameters.back().name, "lm_head.weight");
  // mlp=3072 is GPT-2's default 4 x 768: the same model.
  expect_same_layers(load_model("transformer:layers=12,hidden=768,heads=12,seq=1024,vocab=50257,mlp=3072,tied",
                                kModels),
                     tied);
  // mlp=2048 changes c_fc and c_proj: 2 x 768 x (3072 - 2048) + (3072 - 2048) fewer per block.
  const auto narrow =
      load_model("transformer:layers=12,hidden=768,heads=12,seq=1024,vocab=50257,mlp=2048,tied", kModels);
  EXPECT_EQ(model_parameter_count(narrow), 124'439'808 - 12 * (2 * 768 * 1024 + 1024));
}

TEST(Parametric, BertLargeSizedStackMatchesThePublishedCountUpToBertsExtraTensors) {
  // BERT-large (Hugging Face bert-large-uncased BertModel, published 335,141,888)
  // is this GPT-2-style stack plus token-type embeddings (2 x 1024) and the pooler
  // (1024 x 1024 + 1024); ln_f and BERT's embedding LayerNorm have the same size.
  const auto m = load_model("transformer:layers=24,hidden=1024,heads=16,seq=512,vocab=30522,tied", kModels);
  EXPECT_EQ(model_parameter_count(m) + 2 * 1024 + (1024 * 1024 + 1024), 335'141'888);
}

TEST(Parametric, BadSpecsNameTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"transformer:layers=12,hidden=768,heads=12,seq=1024", "missing vocab"},
      {"transformer:layers=12,hidden=768,heads=12,seq=1024,vocab=50257,depth=3", "'depth=3' is not a key"},
      {"transformer:layers=x,hidden=768,heads=12,seq=1024,vocab=50257", "layers is 'x', not a positive integer"},
      {"transformer:layers=0,hidden=768,heads=12,seq=1024,vocab=50257", "layers is '0'"},
      {"transformer:layers=2,hidden=768,heads=10,seq=1024,vocab=50257", "heads=10 does not divide hidden=768"},
      {"transformer:layers=2,layers=3,hidden=768,heads=12,seq=1024,vocab=50257", "key 'layers' given twice"},
      {"transformer:layers=2,hidden=768,heads=12,seq=1024,vocab=50257,", "'' is not a key"},
      // Bounded so that no shape, FLOP or activation product overflows 64 bits (4 x hidden
      // wrapped negative before the bound: "negative dimension in shape").
      {"transformer:layers=2,hidden=4611686018427387904,heads=1,seq=1024,vocab=50257",
       "hidden is 4611686018427387904, more than 65536, the largest dptwin models"},
      {"transformer:layers=1025,hidden=768,heads=12,seq=1024,vocab=50257", "layers is 1025, more than 1024"},
      {"transformer:layers=2,hidden=768,heads=12,seq=1048577,vocab=50257", "seq is 1048577, more than 1048576"},
      {"transformer:layers=2,hidden=768,heads=12,seq=1024,vocab=4194305", "vocab is 4194305, more than 4194304"},
      {"transformer:layers=2,hidden=768,heads=12,seq=1024,vocab=50257,mlp=262145", "mlp is 262145, more than 262144"},
  };
  for (const auto& [spec, message] : cases) {
    try {
      load_model(spec, kModels);
      ADD_FAILURE() << spec << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(spec), std::string::npos) << e.what();
    }
  }
}

// ---- Hugging Face config.json -----------------------------------------------------

TEST(HfConfig, PublishedParameterCounts) {
  // Published counts (Hugging Face model cards and the papers), not computed here.
  EXPECT_EQ(model_parameter_count(hf("gpt2")), 124'439'808);
  EXPECT_EQ(model_parameter_count(hf("llama-2-7b")), 6'738'415'616);
  EXPECT_EQ(model_parameter_count(hf("bert-base-uncased")), 109'514'298);     // BertForMaskedLM, as the file names
  EXPECT_EQ(model_parameter_count(hf("vit-base-patch16-224")), 86'567'656);  // with the 1000-class head
}

// bert-base-uncased's config.json with `architectures` set to `cls` (and extra keys).
ModelDescription bert_base_as(const std::string& cls, const std::string& extra = "") {
  std::ifstream in(kModels / "hf" / "bert-base-uncased" / "config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str());
  j["architectures"] = nlohmann::json::array({cls});
  if (!extra.empty()) j.update(nlohmann::json::parse(extra));
  return parse_hf_config(j.dump(), "bert.json", "bert-" + cls);
}

TEST(HfConfig, BertHeadsAsTheClassArchitecturesNames) {
  // Counts transformers gives for bert-base-uncased's classes, worked by hand from the
  // tensors, not computed by the code under test: BertModel 109,482,240 less the pooler
  // (768 x 768 + 768 = 590,592) plus the MLM head (transform 590,592, LayerNorm 1,536,
  // decoder bias 30,522; the decoder weight is the tied word embedding) = 109,514,298;
  // BertForSequenceClassification adds 768 x 2 + 2 to BertModel: 109,483,778.
  EXPECT_EQ(model_parameter_count(bert_base_as("BertModel")), 109'482'240);
  const auto mlm = bert_base_as("BertForMaskedLM");
  EXPECT_EQ(model_parameter_count(mlm), 109'514'298);
  EXPECT_EQ(mlm.layers.back().name, "cls");
  EXPECT_EQ(mlm.layers.back().parameters.front().name, "cls.predictions.bias");
  for (const auto& l : mlm.layers) EXPECT_NE(l.name, "pooler");
  // The head's FLOPs per 512-token sample: transform 2 x 512 x 768^2 and decoder
  // 2 x 512 x 768 x 30522, about 24.6 GFLOP, against the pooler's 1.2 MFLOP.
  EXPECT_GT(mlm.layers.back().forward_flops_per_sample, 2.0 * 512 * 768 * 30522);
  EXPECT_EQ(model_parameter_count(bert_base_as("BertForSequenceClassification")), 109'483'778);
  EXPECT_EQ(model_parameter_count(bert_base_as("BertForSequenceClassification", R"({"num_labels": 3})")),
            109'482'240 + 768 * 3 + 3);
  EXPECT_EQ(model_parameter_count(
                bert_base_as("BertForSequenceClassification", R"({"id2label": {"0": "a", "1": "b", "2": "c", "3": "d"}})")),
            109'482'240 + 768 * 4 + 4);
  // A class this reader does not build is refused, naming the key and the class.
  try {
    bert_base_as("BertForQuestionAnswering");
    ADD_FAILURE() << "BertForQuestionAnswering was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bert.json"), std::string::npos) << what;
    EXPECT_NE(what.find("architectures"), std::string::npos) << what;
    EXPECT_NE(what.find("BertForQuestionAnswering"), std::string::npos) << what;
  }
}

// The library's files model eager attention (generate.py), so a config read with :attn=eager
// equals them; read as transformers runs it by default (sdpa) it differs in attention alone
// (SdpaDropsTheScoresAndKeepsEverythingElse).
TEST(HfConfig, FamiliesEqualTheLibraryModelsOfTheSameConfig) {
  expect_same_layers(hf_as("gpt2", ":attn=eager"), library("gpt2-124m"));
  expect_same_layers(hf_as("llama-2-7b", ":attn=eager"), library("llama-2-7b"));
  // bert-large-uncased's published config with BertForPreTraining named.
  const std::string bert_large = R"({"model_type": "bert", "architectures": ["BertForPreTraining"],
      "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096,
      "max_position_embeddings": 512, "vocab_size": 30522, "type_vocab_size": 2})";
  expect_same_layers(parse_hf_config(bert_large, "bert-large.json", "bert-large", std::nullopt, AttentionImpl::eager),
                     library("bert-large"));
}

namespace {
// The second difference over s, 2s, 3s tokens of a model's saved activations per sample:
// zero (up to one element of rounding per layer) when every term is linear in s, 2 c s^2
// for a term c s^2 (eager attention's a x s x s probabilities).
double activation_second_difference(const std::string& dir, const std::string& suffix, std::int64_t s) {
  auto acts = [&](std::int64_t n) {
    return static_cast<double>(
        model_activation_elements_per_sample(hf_as(dir, fmt::format(":seq={}{}", n, suffix))));
  };
  return acts(3 * s) - 2 * acts(2 * s) + acts(s);
}

// Whether `a` and `b` register the same parameters (names and shapes, in order).
bool same_parameters(const ModelDescription& a, const ModelDescription& b) {
  if (a.layers.size() != b.layers.size()) return false;
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const auto& x = a.layers[i].parameters;
    const auto& y = b.layers[i].parameters;
    if (x.size() != y.size()) return false;
    for (size_t j = 0; j < x.size(); ++j)
      if (x[j].name != y[j].name || x[j].shape != y[j].shape) return false;
  }
  return true;
}
}  // namespace

// Invariant: scaled_dot_product_attention's fused kernel saves no s x s tensor, so a model
// built with sdpa saves activations linear in its sequence (second difference over s, 2s,
// 3s within one element of rounding per layer), where eager attention's probabilities grow
// with s^2; its parameters are eager's; its attention is one fused kernel per block, causal
// in GPT-2 and Llama, not in BERT; and its FLOPs are eager's less the softmax's 5 a s^2 per
// block (GPT-2 124M at 1,024 tokens: 12 x 5 x 12 x 1024^2 = 754,974,720, by hand).
// Planted bug: sdpa-scores-saved (the builders keep eager's probabilities and dropout mask).
TEST(HfConfig, SdpaDropsTheScoresAndKeepsEverythingElse) {
  for (const auto& [dir, s] : std::vector<std::pair<std::string, std::int64_t>>{{"gpt2", 128}, {"llama-2-7b", 256},
                                                                                {"bert-base-uncased", 64}}) {
    SCOPED_TRACE(dir);
    const double layers = static_cast<double>(hf(dir).layers.size());
    EXPECT_LE(std::abs(activation_second_difference(dir, "", s)), 4 * layers);
    EXPECT_GT(activation_second_difference(dir, ":attn=eager", s), 1e6);
    EXPECT_TRUE(same_parameters(hf(dir), hf_as(dir, ":attn=eager")));
    for (const auto& l : hf(dir).layers) {
      EXPECT_TRUE(l.bmms.empty()) << l.name;
      if (l.type == "GPT2Block" || l.type == "LlamaDecoderLayer" || l.type == "BertLayer") {
        ASSERT_TRUE(l.sdpa.has_value()) << l.name;
        EXPECT_EQ(l.sdpa->causal, dir != "bert-base-uncased") << l.name;
      }
    }
  }
  EXPECT_DOUBLE_EQ(model_forward_flops_per_sample(hf_as("gpt2", ":attn=eager")) - model_forward_flops_per_sample(hf("gpt2")),
                   754'974'720.0);
}

// What a config builds, `model show` writes and the model file reader reads back: eager
// attention at 1,048,576 tokens would save 3.5e13 elements per Llama-2 layer and sample,
// past the reader's 10^13, so it is refused where it is built, naming the way out; sdpa
// saves none of the s x s tensor and builds.
TEST(HfConfig, EagerAttentionPastTheActivationBoundIsRefusedNamingSdpa) {
  try {
    (void)hf_as("llama-2-7b", ":seq=1048576:attn=eager");
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("more than 10^13"), std::string::npos) << what;
    EXPECT_NE(what.find(":attn=sdpa"), std::string::npos) << what;
  }
  const auto sdpa = hf_as("llama-2-7b", ":seq=1048576");
  EXPECT_EQ(parse_model_yaml(model_to_yaml(sdpa), "back.yaml").layers.size(), sdpa.layers.size());
}

TEST(HfConfig, PlantedBugSdpaKeepingTheScoresIsCaught) {
  const ScopedFault planted(Fault::sdpa_scores_saved);
  EXPECT_GT(activation_second_difference("gpt2", "", 128), 1e6);
}

// Invariant: the attention a model runs comes from its reference's :attn= suffix, else the
// config's attn_implementation / _attn_implementation (flash_attention_2 runs the same
// kernels as sdpa), else sdpa; a value dptwin does not model is refused naming the key or
// the suffix; transformer: specs take attn=sdpa and keep eager by default.
TEST(HfConfig, AttentionFromSuffixConfigOrTransformersDefault) {
  const std::string gpt2 = R"({"model_type": "gpt2", "n_layer": 1, "n_embd": 64, "n_head": 2, "n_positions": 32,
      "vocab_size": 100)";
  auto attn_of = [](const ModelDescription& m) { return m.layers.at(1).sdpa ? "sdpa" : "eager"; };
  EXPECT_STREQ(attn_of(parse_hf_config(gpt2 + "}", "g.json", "g")), "sdpa");
  EXPECT_STREQ(attn_of(parse_hf_config(gpt2 + R"(, "_attn_implementation": "eager"})", "g.json", "g")), "eager");
  EXPECT_STREQ(attn_of(parse_hf_config(gpt2 + R"(, "attn_implementation": "flash_attention_2"})", "g.json", "g")),
               "sdpa");
  EXPECT_STREQ(attn_of(parse_hf_config(gpt2 + R"(, "attn_implementation": "eager"})", "g.json", "g", std::nullopt,
                                       AttentionImpl::sdpa)),
               "sdpa");
  try {
    parse_hf_config(gpt2 + R"(, "attn_implementation": "flex_attention"})", "g.json", "g");
    ADD_FAILURE() << "flex_attention was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("g.json: attn_implementation"), std::string::npos) << what;
    EXPECT_NE(what.find("flex_attention"), std::string::npos) << what;
  }
  const auto ref = parse_hf_reference("dir/config.json:attn=eager:seq=64");
  EXPECT_EQ(ref.path, fs::path("dir/config.json"));
  EXPECT_EQ(ref.seq, 64);
  EXPECT_EQ(ref.attn, AttentionImpl::eager);
  const auto other_order = parse_hf_reference("dir/config.json:seq=64:attn=sdpa");
  EXPECT_EQ(other_order.seq, 64);
  EXPECT_EQ(other_order.attn, AttentionImpl::sdpa);
  EXPECT_THROW(parse_hf_reference("dir/config.json:attn=flash"), std::invalid_argument);
  for (const char* twice : {"dir/config.json:attn=sdpa:attn=eager", "dir/config.json:seq=1:seq=2"}) {
    try {
      (void)parse_hf_reference(twice);
      ADD_FAILURE() << twice << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("given twice"), std::string::npos) << e.what();
    }
  }
  const std::string spec = "transformer:layers=1,hidden=64,heads=2,seq=32,vocab=100";
  EXPECT_STREQ(attn_of(load_model(spec, kModels)), "eager");
  EXPECT_STREQ(attn_of(load_model(spec + ",attn=sdpa", kModels)), "sdpa");
  EXPECT_EQ(load_model(spec + ",attn=sdpa", kModels).name, spec + ",attn=sdpa");
}

TEST(HfConfig, ParameterNamesAsTransformersRegistersThem) {
  const auto vit = hf("vit-base-patch16-224");
  ASSERT_EQ(vit.layers.size(), 14u);
  const auto& emb = vit.layers.front().parameters;
  ASSERT_EQ(emb.size(), 4u);
  EXPECT_EQ(emb[0].name, "cls_token");
  EXPECT_EQ(emb[0].shape, (Shape{1, 1, 768}));
  EXPECT_EQ(emb[1].name, "position_embeddings");
  EXPECT_EQ(emb[1].shape, (Shape{1, 197, 768}));  // 14 x 14 patches and the class token
  EXPECT_EQ(emb[2].shape, (Shape{768, 3, 16, 16}));
  EXPECT_EQ(vit.layers[1].parameters[0].name, "attention.attention.query.weight");
  EXPECT_EQ(vit.layers.back().parameters[2].name, "classifier.weight");
  EXPECT_EQ(vit.layers.back().parameters[2].shape, (Shape{1000, 768}));
  const auto bert = hf("bert-base-uncased");
  EXPECT_EQ(bert.layers.back().name, "cls");  // BertForMaskedLM's head
  EXPECT_EQ(bert.layers[1].parameters[0].name, "attention.self.query.weight");
  // id2label's size gives the classes, as transformers reads it.
  const auto two = parse_hf_config(R"({"model_type": "vit", "hidden_size": 64, "num_hidden_layers": 1,
      "num_attention_heads": 4, "intermediate_size": 128, "image_size": 32, "patch_size": 8,
      "id2label": {"0": "cat", "1": "dog", "2": "bird"}})", "tiny.json", "tiny");
  EXPECT_EQ(two.layers.back().output_features, 3);
}

// A training sequence shorter than the config's positions: `hf:PATH:seq=N`.
TEST(HfConfig, TrainingSequenceSuffixSetsTokensPerSampleNotParameters) {
  const auto path = (kModels / "hf" / "gpt2" / "config.json").string();
  const auto gpt2 = load_model("hf:" + path + ":seq=512", kModels);
  // transformers' count for GPT2LMHeadModel (its card): the position table keeps n_positions
  // rows (1024 x 768), whatever length the batches have.
  EXPECT_EQ(model_parameter_count(gpt2), 124'439'808);
  EXPECT_EQ(gpt2.layers.front().parameters[1].name, "wpe.weight");
  EXPECT_EQ(gpt2.layers.front().parameters[1].shape, (Shape{1024, 768}));
  EXPECT_EQ(gpt2.sample, "a 512-token sequence");
  EXPECT_EQ(gpt2.name, "hf:" + path + ":seq=512");
  // Every GEMM of a block has one row per token: c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj.
  ASSERT_EQ(gpt2.layers[1].gemms.size(), 4u);
  for (const auto& g : gpt2.layers[1].gemms) EXPECT_EQ(g.rows_per_sample, 512);
  // Half the tokens: the weight GEMMs' 24 s h^2 halves and attention's 4 s^2 h quarters, so a
  // block costs less than half the 1024-token one and more than a quarter.
  const auto full = hf("gpt2");
  EXPECT_LT(gpt2.layers[1].forward_flops_per_sample, 0.5 * full.layers[1].forward_flops_per_sample);
  EXPECT_GT(gpt2.layers[1].forward_flops_per_sample, 0.25 * full.layers[1].forward_flops_per_sample);

  // Llama's rotary positions have no table: any length, the same 6,738,415,616 parameters.
  const auto llama_path = (kModels / "hf" / "llama-2-7b" / "config.json").string();
  for (const int seq : {512, 8192}) {
    const auto llama = load_model(fmt::format("hf:{}:seq={}", llama_path, seq), kModels);
    EXPECT_EQ(model_parameter_count(llama), 6'738'415'616);
    EXPECT_EQ(llama.sample, fmt::format("a {}-token sequence", seq));
  }
  // BERT keeps its 512 learned positions and its class's count (BertForMaskedLM).
  const auto bert = load_model("hf:" + (kModels / "hf" / "bert-base-uncased" / "config.json").string() + ":seq=128",
                               kModels);
  EXPECT_EQ(model_parameter_count(bert), 109'514'298);
  EXPECT_EQ(bert.sample, "a 128-token sequence (masked-LM head)");
}

TEST(HfConfig, TrainingSequenceSuffixErrorsNameWhatIsWrong) {
  const auto error_of = [](const std::string& model) -> std::string {
    try {
      load_model(model, kModels);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted: " + model;
  };
  const auto dir = kModels / "hf";
  // Longer than a learned position table: PyTorch's lookup fails past it.
  const auto long_gpt2 = error_of("hf:" + (dir / "gpt2" / "config.json").string() + ":seq=2048");
  EXPECT_NE(long_gpt2.find("n_positions"), std::string::npos) << long_gpt2;
  EXPECT_NE(long_gpt2.find(":seq=2048"), std::string::npos) << long_gpt2;
  EXPECT_NE(long_gpt2.find("at most 1024"), std::string::npos) << long_gpt2;
  const auto long_bert = error_of("hf:" + (dir / "bert-base-uncased" / "config.json").string() + ":seq=513");
  EXPECT_NE(long_bert.find("max_position_embeddings"), std::string::npos) << long_bert;
  // A ViT sample is an image.
  const auto vit = error_of("hf:" + (dir / "vit-base-patch16-224" / "config.json").string() + ":seq=16");
  EXPECT_NE(vit.find("one image"), std::string::npos) << vit;
  // Another suffix reads as part of the file name: the error says which suffixes there are.
  const auto other = error_of("hf:" + (dir / "gpt2" / "config.json").string() + ":len=4096");
  EXPECT_NE(other.find("':len=4096' is not a suffix this reader knows"), std::string::npos) << other;
  // Not a number of tokens.
  for (const std::string bad : {"", "0", "x", "12k", "-4", "99999999999"}) {
    const auto text = error_of("hf:" + (dir / "gpt2" / "config.json").string() + ":seq=" + bad);
    EXPECT_NE(text.find(fmt::format("seq: '{}' is not a number of tokens", bad)), std::string::npos) << text;
  }
}

TEST(HfConfig, GroupedQueryAttentionNarrowsKeyAndValue) {
  // Llama with 8 of 32 heads for keys and values: k_proj and v_proj are [1024, 4096].
  const auto m = parse_hf_config(R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 2,
      "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
      "max_position_embeddings": 8192, "vocab_size": 128256})", "gqa.json", "gqa");
  EXPECT_EQ(m.layers[1].parameters[1].name, "self_attn.k_proj.weight");
  EXPECT_EQ(m.layers[1].parameters[1].shape, (Shape{1024, 4096}));
  EXPECT_EQ(m.layers[1].parameters[2].shape, (Shape{1024, 4096}));
}

// hidden_act: a name transformers' ACT2FN knows runs as act(gate) * up with the same bytes per
// element, so it costs as SiLU does and says so in the sources; a name it does not know is
// refused, naming the key (it was read as SiLU whatever it said).
TEST(HfConfig, LlamaActivationIsReadNotAssumed) {
  const std::string base = R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 64, "vocab_size": 100)";
  const auto silu = parse_hf_config(base + R"(, "hidden_act": "silu"})", "a.json", "a");
  const auto gelu = parse_hf_config(base + R"(, "hidden_act": "gelu_pytorch_tanh"})", "b.json", "b");
  const auto plain = parse_hf_config(base + "}", "c.json", "c");
  ASSERT_EQ(gelu.layers.size(), silu.layers.size());
  for (size_t i = 0; i < gelu.layers.size(); ++i) {
    EXPECT_EQ(gelu.layers[i].memory_bound_forward_elements_per_sample,
              silu.layers[i].memory_bound_forward_elements_per_sample);
    EXPECT_EQ(gelu.layers[i].forward_flops_per_sample, silu.layers[i].forward_flops_per_sample);
  }
  EXPECT_EQ(gelu.sources.size(), silu.sources.size() + 1);
  EXPECT_NE(gelu.sources.back().find("hidden_act gelu_pytorch_tanh: costed as SiLU"), std::string::npos);
  EXPECT_EQ(plain.sources.size(), silu.sources.size());
  for (const std::string bad : {R"("swiglu")", R"(7)", R"("Silu")"}) {
    try {
      parse_hf_config(base + R"(, "hidden_act": )" + bad + "}", "d.json", "d");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("d.json: hidden_act: " + bad + " is not an activation this reader knows (silu, swish"),
                std::string::npos)
          << what;
    }
  }
}

// tie_word_embeddings: false gives BERT's masked-LM decoder a weight of its own, as
// transformers builds it: vocab x hidden more parameters (30,522 x 768 on BERT-base), named
// cls.predictions.decoder.weight after the transform; the pooler-only model has no decoder.
// It was ignored: 109,514,298 for the untied BertForMaskedLM (an outside-user review).
// A model folder reads its config.json, as from_pretrained(folder) does; a folder without one
// says so (it said "no such file, or not a file").
TEST(HfConfig, AModelFolderReadsItsConfig) {
  const auto dir = kModels / "hf" / "gpt2";
  const auto by_folder = load_model("hf:" + dir.string() + ":seq=128", kModels);
  const auto by_file = load_model("hf:" + (dir / "config.json").string() + ":seq=128", kModels);
  EXPECT_EQ(model_parameter_count(by_folder), model_parameter_count(by_file));
  EXPECT_EQ(model_forward_flops_per_sample(by_folder), model_forward_flops_per_sample(by_file));
  try {
    load_model("hf:" + (kModels / "hf").string(), kModels);
    ADD_FAILURE() << "a folder without config.json was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is a folder without a config.json"), std::string::npos) << e.what();
  }
}

TEST(HfConfig, BertUntiedDecoderHasItsOwnWeight) {
  const std::string base = R"({"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12,
      "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 512, "vocab_size": 30522,
      "type_vocab_size": 2)";
  const auto count = [](const ModelDescription& m) {
    std::int64_t n = 0;
    for (const auto& l : m.layers)
      for (const auto& p : l.parameters) n += shape_numel(p.shape);
    return n;
  };
  for (const char* cls : {"BertForMaskedLM", "BertForPreTraining"}) {
    SCOPED_TRACE(cls);
    const std::string arch = std::string(R"(, "architectures": [")") + cls + "\"]";
    const auto tied = parse_hf_config(base + arch + "}", "t.json", "t");
    const auto untied = parse_hf_config(base + arch + R"(, "tie_word_embeddings": false})", "u.json", "u");
    EXPECT_EQ(count(untied) - count(tied), 30522 * 768);
    const auto& head = untied.layers.back().parameters;
    const auto it = std::find_if(head.begin(), head.end(),
                                 [](const auto& p) { return p.name == "cls.predictions.decoder.weight"; });
    ASSERT_NE(it, head.end());
    EXPECT_EQ(it->shape, (Shape{30522, 768}));
    EXPECT_EQ((it - 1)->name, "cls.predictions.transform.LayerNorm.bias");
  }
  EXPECT_EQ(count(parse_hf_config(base + R"(, "architectures": ["BertForMaskedLM"], "tie_word_embeddings": false})",
                                  "u.json", "u")),
            132955194);  // transformers' BertForMaskedLM(config).num_parameters() with the key false
  EXPECT_EQ(count(parse_hf_config(base + R"(, "tie_word_embeddings": false})", "p.json", "p")),
            count(parse_hf_config(base + "}", "p.json", "p")));
}

TEST(HfConfig, BadConfigsNameTheFileAndTheKey) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {R"({"model_type": "t5", "d_model": 512})", {"cfg.json", "model_type", "'t5' is not a family", "gpt2, llama"}},
      {R"({"n_layer": 12})", {"cfg.json", "model_type", "missing"}},
      {R"({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "n_positions": 1024})",
       {"cfg.json", "vocab_size", "missing"}},
      {R"({"model_type": "gpt2", "n_layer": "12", "n_embd": 768, "n_head": 12, "n_positions": 1024,
           "vocab_size": 5})",
       {"cfg.json", "n_layer", "expected an integer"}},
      {R"({"model_type": "llama", "attention_bias": true})", {"cfg.json", "attention_bias"}},
      {R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
           "head_dim": 256})",
       {"cfg.json", "head_dim", "256 x 32 heads is not hidden_size 4096"}},
      {R"({"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 0, "num_attention_heads": 12,
           "intermediate_size": 3072, "max_position_embeddings": 512, "vocab_size": 30522})",
       {"cfg.json", "num_hidden_layers must be positive"}},
      {"{not json", {"cfg.json", "not valid JSON"}},
      // GPT-2's and BERT's activation keys: known names only (a typo was read as GELU).
      {R"({"model_type": "gpt2", "activation_function": "gelu_neww", "n_layer": 1, "n_embd": 64, "n_head": 4,
           "n_positions": 64, "vocab_size": 100})",
       {"cfg.json", "activation_function", "\"gelu_neww\" is not an activation this reader knows"}},
      {R"({"model_type": "bert", "hidden_act": "geglu", "hidden_size": 64, "num_hidden_layers": 1,
           "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 64, "vocab_size": 100})",
       {"cfg.json", "hidden_act", "\"geglu\" is not an activation this reader knows"}},
      // Another transformers class than the one built: refused, not built with the wrong head
      // (LlamaModel has no LM head; read as LlamaForCausalLM it counted and charged one).
      {R"({"model_type": "llama", "architectures": ["LlamaModel"], "num_hidden_layers": 2, "hidden_size": 64,
           "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 64, "vocab_size": 100})",
       {"cfg.json", "architectures", "\"LlamaModel\" is not a class", "LlamaForCausalLM"}},
      {R"({"model_type": "gpt2", "architectures": ["GPT2ForSequenceClassification"], "n_layer": 1, "n_embd": 64,
           "n_head": 4, "n_positions": 64, "vocab_size": 100})",
       {"cfg.json", "architectures", "GPT2ForSequenceClassification", "GPT2LMHeadModel"}},
      {R"({"model_type": "vit", "architectures": ["ViTModel"], "num_hidden_layers": 1, "hidden_size": 64,
           "num_attention_heads": 4, "intermediate_size": 128, "image_size": 32, "patch_size": 8})",
       {"cfg.json", "architectures", "ViTModel", "ViTForImageClassification"}},
      // Fields that add layers or parameters this reader does not model.
      {R"({"model_type": "gpt2", "add_cross_attention": true, "n_layer": 1, "n_embd": 64, "n_head": 4,
           "n_positions": 64, "vocab_size": 100})",
       {"cfg.json", "add_cross_attention", "not modelled"}},
      {R"({"model_type": "bert", "position_embedding_type": "relative_key", "hidden_size": 64, "num_hidden_layers": 1,
           "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 64, "vocab_size": 100})",
       {"cfg.json", "position_embedding_type", "relative_key", "not modelled"}},
  };
  for (const auto& [text, messages] : cases) {
    try {
      parse_hf_config(text, "cfg.json", "cfg");
      ADD_FAILURE() << text << " was accepted";
    } catch (const std::invalid_argument& e) {
      for (const auto& m : messages) EXPECT_NE(std::string(e.what()).find(m), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(load_model("hf:" + (kModels / "hf" / "no-such" / "config.json").string(), kModels),
               std::invalid_argument);
}

// Sizes are bounded so that no shape, FLOP or activation count can overflow, and a number
// beyond a double is bad JSON, not nlohmann's out_of_range (fuzz_hf_config found the first
// and the last; the inputs are kept in verify/fuzz/crashes/fuzz_hf_config/).
TEST(HfConfig, OversizedValuesAreErrorsNamingTheKey) {
  auto error_text = [](const std::string& text) -> std::string {
    try {
      (void)parse_hf_config(text, "cfg.json", "cfg");
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    ADD_FAILURE() << text << " was accepted";
    return "";
  };
  EXPECT_EQ(error_text(R"({"model_type": "gpt2", "n_layer": 1e400})"),
            "cfg.json: not valid JSON: [json.exception.out_of_range.406] number overflow parsing '1e400'");
  EXPECT_EQ(error_text(R"({"model_type": "gpt2", "n_layer": 1, "n_embd": 64, "n_head": 4, "n_ctx": 2064006728,
                           "vocab_size": 1000})"),
            "cfg.json: n_ctx: 2064006728 is more than 1048576, the largest this reader models");
  EXPECT_EQ(error_text(R"({"model_type": "gpt2", "n_layer": 1000000000, "n_embd": 64, "n_head": 4, "n_ctx": 8,
                           "vocab_size": 10})"),
            "cfg.json: n_layer: 1000000000 is more than 1024, the largest this reader models");
  EXPECT_EQ(error_text(R"({"model_type": "gpt2", "n_layer": 1, "n_embd": 4611686018427387904, "n_head": 1,
                           "n_ctx": 8, "vocab_size": 10})"),
            "cfg.json: n_embd: 4611686018427387904 is more than 65536, the largest this reader models");
  EXPECT_EQ(error_text(R"({"model_type": "gpt2", "n_layer": 1, "n_embd": 64, "n_head": 4, "n_ctx": 8,
                           "vocab_size": 18446744073709551615})"),
            "cfg.json: vocab_size: 18446744073709551615 is more than 4194304, the largest this reader models");
  EXPECT_EQ(error_text(R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 64,
                           "num_attention_heads": 4, "head_dim": -4611686018427387904})"),
            "cfg.json: head_dim: must be positive, got -4611686018427387904");
  EXPECT_EQ(error_text(R"({"model_type": "vit", "num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 4,
                           "intermediate_size": 128, "image_size": 1048576, "patch_size": 1})"),
            "cfg.json: image_size: 1048576 is more than 32768, the largest this reader models");
  EXPECT_EQ(error_text(R"({"model_type": "vit", "num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 4,
                           "intermediate_size": 128, "image_size": 32768, "patch_size": 1})"),
            "cfg.json: patch_size: image_size 32768 in patches of 1 is 1073741825 tokens, more than 1048576, the "
            "largest this reader models");
  // The largest published shapes stay inside the bounds (Llama 3.1 405B).
  const auto big = parse_hf_config(R"({"model_type": "llama", "num_hidden_layers": 126, "hidden_size": 16384,
      "num_attention_heads": 128, "num_key_value_heads": 8, "intermediate_size": 53248,
      "max_position_embeddings": 131072, "vocab_size": 128256})", "405b.json", "405b");
  EXPECT_EQ(big.layers.size(), 128u);
}

// ---- the writer -------------------------------------------------------------------

TEST(ModelYaml, WriterRoundTripsEveryKindOfModel) {
  // Invariant: reading back what model_to_yaml wrote gives the same description
  // (and the reader checks the totals the writer computed against the layers).
  for (const std::string name : {"resnet50", "bert-large", "gpt2-124m", "llama-2-7b", "mlp:4-16-2",
                                 "transformer:layers=2,hidden=64,heads=4,seq=32,vocab=100,mlp=96",
                                 "transformer:layers=2,hidden=64,heads=4,seq=32,vocab=100,attn=sdpa"}) {
    SCOPED_TRACE(name);
    const auto m = load_model(name, kModels);
    const auto back = parse_model_yaml(model_to_yaml(m), name);
    EXPECT_EQ(back.name, m.name);
    EXPECT_EQ(back.sample, m.sample);
    EXPECT_EQ(back.sources, m.sources);
    expect_same_layers(back, m);
    for (size_t i = 0; i < m.layers.size(); ++i) {
      EXPECT_EQ(back.layers[i].memory_bound_forward_elements_per_sample, m.layers[i].memory_bound_forward_elements_per_sample);
      EXPECT_EQ(back.layers[i].memory_bound_backward_elements_per_sample, m.layers[i].memory_bound_backward_elements_per_sample);
      EXPECT_EQ(back.layers[i].conv_io_elements_per_sample, m.layers[i].conv_io_elements_per_sample);
      EXPECT_EQ(back.layers[i].memory_bound_forward_f32_elements_per_sample,
                m.layers[i].memory_bound_forward_f32_elements_per_sample);
      EXPECT_EQ(back.layers[i].memory_bound_backward_f32_elements_per_sample,
                m.layers[i].memory_bound_backward_f32_elements_per_sample);
      EXPECT_EQ(back.layers[i].autocast_forward_cast_elements_per_sample,
                m.layers[i].autocast_forward_cast_elements_per_sample);
      EXPECT_EQ(back.layers[i].autocast_backward_cast_elements_per_sample,
                m.layers[i].autocast_backward_cast_elements_per_sample);
      ASSERT_EQ(back.layers[i].sdpa.has_value(), m.layers[i].sdpa.has_value());
      if (const auto& a = m.layers[i].sdpa) {
        const auto& b = *back.layers[i].sdpa;
        EXPECT_EQ(std::tie(b.heads, b.query_len, b.key_len, b.head_dim, b.causal),
                  std::tie(a->heads, a->query_len, a->key_len, a->head_dim, a->causal));
      }
    }
  }
}

// A model file's fused attention is checked as its batched matmuls are: sizes positive and
// within a tensor's bound, its FLOPs within the layer's, not with bmms; errors name the key.
TEST(ModelYaml, SdpaKeyIsChecked) {
  const std::string text =
      model_to_yaml(load_model("transformer:layers=1,hidden=64,heads=4,seq=32,vocab=100,attn=sdpa", kModels));
  const std::string line = "sdpa: {heads: 4, query_len: 32, key_len: 32, head_dim: 16, causal: true}";
  ASSERT_NE(text.find(line), std::string::npos) << text;
  auto error_with = [&](const std::string& replacement) {
    std::string t = text;
    t.replace(t.find(line), line.size(), replacement);
    try {
      (void)parse_model_yaml(t, "m.yaml");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(error_with("sdpa: {heads: 0, query_len: 32, key_len: 32, head_dim: 16, causal: true}").find("heads"),
            std::string::npos);
  EXPECT_NE(error_with("sdpa: {heads: 4, query_len: 32, key_len: 32, head_dim: 16, causal: true, window: 8}").find("window"),
            std::string::npos);
  EXPECT_NE(error_with("sdpa: {heads: 4000, query_len: 32000, key_len: 32000, head_dim: 16, causal: true}").find("sdpa"),
            std::string::npos);
  EXPECT_NE(error_with(line + "\n    bmms:\n      - {count: 4, m: 32, n: 32, k: 16}").find("not both"),
            std::string::npos);
  EXPECT_NE(error_with("sdpa: {heads: 4, query_len: 32, key_len: 32, head_dim: 16}").find("causal"),
            std::string::npos);
}

// A layer's counted memory-bound traffic is given for both passes or for neither; the
// error names the missing key. The library's ResNet-50 counts its conv tensors.
TEST(ModelYaml, MemoryBoundTrafficNeedsBothPasses) {
  std::string text = model_to_yaml(library("resnet50"));
  EXPECT_TRUE(library("resnet50").layers.front().conv_io_elements_per_sample.has_value());
  const auto at = text.find("    memory_bound_backward_elements_per_sample:");
  ASSERT_NE(at, std::string::npos);
  text.erase(at, text.find('\n', at) - at + 1);
  try {
    (void)parse_model_yaml(text, "m.yaml");
    FAIL() << "accepted a forward count without a backward one";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("memory_bound_backward_elements_per_sample"), std::string::npos) << e.what();
  }
}

// A layer's autocast-f32 share is part of its counted traffic: more than the count is an
// error naming the key and both figures. GPT-2's blocks carry a share (LayerNorms, softmax,
// the residual stream, gelu_new), ResNet-50's layers none (BatchNorm and ReLU run in f16).
TEST(ModelYaml, AutocastF32ShareIsAPartOfTheCount) {
  const ModelDescription gpt2 = library("gpt2-124m");
  const LayerDescription& block = gpt2.layers.at(1);
  ASSERT_TRUE(block.memory_bound_forward_f32_elements_per_sample.has_value());
  EXPECT_GT(*block.memory_bound_forward_f32_elements_per_sample, 0);
  EXPECT_LT(*block.memory_bound_forward_f32_elements_per_sample, *block.memory_bound_forward_elements_per_sample);
  for (const auto& l : library("resnet50").layers) EXPECT_FALSE(l.memory_bound_forward_f32_elements_per_sample) << l.name;
  std::string text = model_to_yaml(gpt2);
  const std::string key = "    memory_bound_backward_f32_elements_per_sample: ";
  const auto at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  text.replace(at + key.size(), text.find('\n', at) - at - key.size(), "999999999999");
  try {
    (void)parse_model_yaml(text, "m.yaml");
    FAIL() << "accepted an f32 share above the count";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("memory_bound_backward_f32_elements_per_sample: 999999999999 is more than"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelYaml, WriterReproducesTheGeneratedLibraryFile) {
  // generate.py's file without its comment lines is exactly what the writer emits.
  for (const char* name : {"gpt2-124m", "resnet50"}) {
    std::ifstream in(kModels / (std::string(name) + ".yaml"));
    std::stringstream expected;
    for (std::string line; std::getline(in, line);)
      if (line.rfind('#', 0) != 0) expected << line << '\n';
    EXPECT_EQ(model_to_yaml(library(name)), expected.str()) << name;
  }
}

// A layer's listed convolutions are its conv tensors one by one: their inputs plus outputs
// must sum to conv_io_elements_per_sample (the error names the key and both figures). The
// library's ResNets list them: a Bottleneck's three (four with its downsample), the stem's one.
TEST(ModelYaml, ListedConvolutionsSumToTheLayersConvTensors) {
  const ModelDescription rn = library("resnet50");
  EXPECT_EQ(rn.layers.front().convs.size(), 1u);
  EXPECT_EQ(rn.layers.at(1).convs.size(), 4u);
  EXPECT_EQ(rn.layers.at(2).convs.size(), 3u);
  std::string text = model_to_yaml(rn);
  const std::string key = "{flops_per_sample: 236027904, io_elements_per_sample: 953344}";  // the stem's one
  const auto at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, key.size(), "{flops_per_sample: 236027904, io_elements_per_sample: 953345}");
  try {
    (void)parse_model_yaml(text, "m.yaml");
    FAIL() << "accepted convolutions that do not sum to the layer's conv tensors";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("convs: its convolutions' io_elements_per_sample sum to 953345, not the "
                                         "layer's conv_io_elements_per_sample 953344"),
              std::string::npos)
        << e.what();
  }
}

// Each transformer layer lists eager attention's two batched matmuls per head, whose FLOPs
// are the attention term 4 s^2 h of the layer's: for BERT-large at 512 tokens (h 1,024, 16
// heads of 64) QK^T is 16 x [512, 512] over 64 and the scores times V 16 x [512, 64] over
// 512, 2 x 2 x 16 x 512 x 512 x 64 = 1,073,741,824 FLOPs together; GPT-2 124M at 1,024
// tokens: 12 heads of 64, 4 x 1024^2 x 768 = 3,221,225,472. A list whose FLOPs exceed the
// layer's is refused, naming the key.
TEST(ModelYaml, AttentionBatchedMatmulsAreTheAttentionFlops) {
  auto bmm_flops = [](const LayerDescription& l) {
    double f = 0;
    for (const auto& b : l.bmms)
      f += 2.0 * static_cast<double>(b.count) * static_cast<double>(b.m) * static_cast<double>(b.n) *
           static_cast<double>(b.k);
    return f;
  };
  const ModelDescription bert = library("bert-large");
  const LayerDescription& layer = bert.layers.at(1);
  ASSERT_EQ(layer.bmms.size(), 2u);
  EXPECT_TRUE(layer.bmms[0].count == 16 && layer.bmms[0].m == 512 && layer.bmms[0].n == 512 && layer.bmms[0].k == 64);
  EXPECT_TRUE(layer.bmms[1].count == 16 && layer.bmms[1].m == 512 && layer.bmms[1].n == 64 && layer.bmms[1].k == 512);
  EXPECT_EQ(bmm_flops(layer), 1'073'741'824.0);
  EXPECT_EQ(bmm_flops(library("gpt2-124m").layers.at(1)), 3'221'225'472.0);
  EXPECT_TRUE(library("resnet50").layers.at(1).bmms.empty());
  std::string text = model_to_yaml(bert);
  const std::string key = "{count: 16, m: 512, n: 512, k: 64}";
  const auto at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, key.size(), "{count: 16000, m: 512, n: 512, k: 64}");
  try {
    (void)parse_model_yaml(text, "m.yaml");
    FAIL() << "accepted batched matmuls of more FLOPs than their layer";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bmms: its batched matmuls'"), std::string::npos) << e.what();
  }
}

// Each transformer layer lists its weight GEMMs, whose shapes the wave model needs: GPT-2
// 124M's block (1,024 tokens, h 768) c_attn [1024, 2304] over 768, attn.c_proj [1024, 768]
// over 768, mlp.c_fc [1024, 3072] over 768, mlp.c_proj [1024, 768] over 3072: 24 s h^2 =
// 14,495,514,624 FLOPs together; its LM head [1024, 50257] over 768. A Llama with grouped
// k and v (hidden 4,096, 32 heads, 8 of k and v) lists k_proj and v_proj 1,024 wide.
TEST(ModelYaml, TransformerLayersListTheirWeightGemms) {
  auto gemm_flops = [](const LayerDescription& l) {
    double f = 0;
    for (const auto& g : l.gemms)
      f += 2.0 * static_cast<double>(g.rows_per_sample) * static_cast<double>(g.n) * static_cast<double>(g.k);
    return f;
  };
  const ModelDescription gpt2 = library("gpt2-124m");
  const LayerDescription& block = gpt2.layers.at(1);
  ASSERT_EQ(block.gemms.size(), 4u);
  EXPECT_TRUE(block.gemms[0].rows_per_sample == 1024 && block.gemms[0].n == 2304 && block.gemms[0].k == 768);
  EXPECT_TRUE(block.gemms[3].rows_per_sample == 1024 && block.gemms[3].n == 768 && block.gemms[3].k == 3072);
  EXPECT_EQ(gemm_flops(block), 14'495'514'624.0);
  const LayerDescription& head = gpt2.layers.back();
  ASSERT_EQ(head.gemms.size(), 1u);
  EXPECT_TRUE(head.gemms[0].rows_per_sample == 1024 && head.gemms[0].n == 50257 && head.gemms[0].k == 768);
  LlamaSpec spec;
  spec.layers = 2;
  spec.hidden = 4096;
  spec.heads = 32;
  spec.kv_heads = 8;
  spec.intermediate = 11008;
  spec.seq = 128;
  spec.vocab = 32000;
  const ModelDescription gqa = describe_llama(spec, "gqa");
  const auto& g = gqa.layers.at(1).gemms;
  ASSERT_EQ(g.size(), 7u);
  EXPECT_EQ(g[1].n, 1024);  // k_proj: 8 heads of 128
  EXPECT_EQ(g[2].n, 1024);  // v_proj
  EXPECT_EQ(g[4].n, 11008);
}

// ---- measured profiles (dptwin_profile's files) ----------------------------------


TEST(Measured, ProfileFileReadsPerSampleTimesAndFrozenParameters) {
  const auto m = parse_model_yaml(profile_yaml("", "    forward_s: 0.002\n    backward_s: 0.002\n"), "p.yaml");
  ASSERT_TRUE(m.measured);
  EXPECT_EQ(m.measured->batch, 4);
  EXPECT_EQ(m.measured->device, "NVIDIA H100 80GB HBM3");
  // 0.002 s and 0.003 s for 4 samples.
  EXPECT_DOUBLE_EQ(*m.layers[0].measured_forward_s_per_sample, 0.0005);
  EXPECT_DOUBLE_EQ(*m.layers[0].measured_backward_s_per_sample, 0.00075);
  EXPECT_FALSE(m.layers[0].parameters[0].requires_grad);
  EXPECT_TRUE(m.layers[0].parameters[1].requires_grad);
  // The writer gives back the batch's times and the frozen mark.
  const auto back = parse_model_yaml(model_to_yaml(m), "back.yaml");
  EXPECT_DOUBLE_EQ(*back.layers[0].measured_forward_s_per_sample, 0.0005);
  EXPECT_FALSE(back.layers[0].parameters[0].requires_grad);
  EXPECT_EQ(back.measured->optimizer, "adamw");
}

TEST(Measured, ProfileFileErrorsNameTheKey) {
  // A layer without times in a measured file, and a device kind that is neither cpu nor cuda.
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {profile_yaml("", ""), "layer 1 has no forward_s and backward_s"},
           {profile_yaml("", "    forward_s: -1\n    backward_s: 0\n"), "forward_s"},
       }) {
    try {
      parse_model_yaml(text, "p.yaml");
      ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("p.yaml"), std::string::npos) << e.what();
    }
  }
  std::string tpu = profile_yaml("", "    forward_s: 0.002\n    backward_s: 0.002\n");
  tpu.replace(tpu.find("device_kind: cuda"), 17, "device_kind: tpu");
  EXPECT_THROW(parse_model_yaml(tpu, "p.yaml"), std::invalid_argument);
}

TEST(Measured, TimesApplyOnlyOnTheGpuKindAndDtypeMeasured) {
  const std::string text = profile_yaml("", "    forward_s: 0.002\n    backward_s: 0.002\n");
  auto on = [&](const std::string& gpu, const std::string& dtype) {
    ModelDescription m = parse_model_yaml(text, "p.yaml");
    const std::string note = apply_measured_costs(m, gpu, dtype);
    EXPECT_FALSE(note.empty());
    return m.layers[0].measured_forward_s_per_sample.has_value();
  };
  EXPECT_TRUE(on("H100-SXM5-80GB", "f32"));   // "H100" is a word of "NVIDIA H100 80GB HBM3"
  EXPECT_FALSE(on("H100-SXM5-80GB", "bf16"));  // another dtype
  EXPECT_FALSE(on("A100-SXM4-80GB", "f32"));   // another GPU
  EXPECT_FALSE(on("H10-PCIE", "f32"));         // a prefix of a word is not the word
  // Where they do not apply, the note says how to make them: profile for that GPU model.
  ModelDescription other = parse_model_yaml(text, "p.yaml");
  const std::string note = apply_measured_costs(other, "host-cpu-1-thread", "bf16");
  EXPECT_NE(note.find("To use them, profile with `dptwin_profile --gpu-model host-cpu-1-thread`, your model built in "
                      "bf16"),
            std::string::npos)
      << note;
  ModelDescription library_model = library("gpt2-124m");
  EXPECT_EQ(apply_measured_costs(library_model, "H100-SXM5-80GB", "f32"), "");
}

TEST(Measured, TheTwinChargesAMeasuredOpItsMeasuredTime) {
  SimGpuRates rates;
  rates.model = "H100-SXM5-80GB";
  rates.peak_flops[DType::f32] = 67e12;
  rates.memory_bandwidth = 3.35e12;
  rates.launch_latency_s = 4e-6;
  OpCost cost{"cost_fwd", OpKind::compute, 1e12, 1 << 20, 1 << 20};
  EXPECT_GT(sim_kernel_time_s(cost, rates, DType::f32), 0.01);  // 1 TFLOP at 67 TFLOPS
  cost.measured_s = 0.0025;
  EXPECT_EQ(sim_kernel_time_s(cost, rates, DType::f32), 0.0025);
}

}  // namespace
}  // namespace dpt
