#include "engine/core/gpu_names.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

namespace dpt {
namespace {

std::vector<std::string> words_of(const std::string& s) {
  std::vector<std::string> out;
  std::string w;
  for (size_t i = 0; i <= s.size(); ++i) {
    const char c = i < s.size() ? s[i] : ' ';
    if (std::isalnum(static_cast<unsigned char>(c))) {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!w.empty()) {
      out.push_back(w);
      w.clear();
    }
  }
  return out;
}

bool has_digit(const std::string& w) {
  return std::any_of(w.begin(), w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// "80gb", "141gb": a memory size.
bool is_memory_size(const std::string& w) {
  return w.size() > 2 && w.compare(w.size() - 2, 2, "gb") == 0 &&
         std::all_of(w.begin(), w.end() - 2, [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

std::string memory_size(const std::vector<std::string>& words) {
  for (const auto& w : words)
    if (is_memory_size(w)) return w;
  return "";
}

bool has_word(const std::vector<std::string>& words, const char* w) {
  return std::find(words.begin(), words.end(), w) != words.end();
}

// Whether `model` occurs in `device` as consecutive words, a model word also matching two
// device words joined.
bool contains_model(const std::vector<std::string>& device, const std::vector<std::string>& model) {
  for (size_t start = 0; start < device.size(); ++start) {
    size_t d = start, m = 0;
    while (m < model.size() && d < device.size()) {
      if (device[d] == model[m]) {
        ++d;
        ++m;
      } else if (d + 1 < device.size() && device[d] + device[d + 1] == model[m]) {
        d += 2;
        ++m;
      } else {
        break;
      }
    }
    if (m == model.size()) return true;
  }
  return false;
}

std::vector<std::string> model_words(const std::vector<std::string>& gpu) {
  std::vector<std::string> model;
  for (const auto& w : gpu) {
    if (is_memory_size(w)) break;  // no digit before the size ("TITAN-RTX-24GB"): the words before it
    model.push_back(w);
    if (has_digit(w)) break;
  }
  return model;
}

bool same_model_words(const std::vector<std::string>& device, const std::vector<std::string>& gpu) {
  const auto model = model_words(gpu);
  return !model.empty() && contains_model(device, model);
}

}  // namespace

bool same_gpu_model(const std::string& device_name, const std::string& gpu_name) {
  return same_model_words(words_of(device_name), words_of(gpu_name));
}

bool same_gpu_kind(const std::string& device_name, const std::string& gpu_name) {
  const auto gpu = words_of(gpu_name), device = words_of(device_name);
  if (!same_model_words(device, gpu)) return false;
  if (has_word(gpu, "pcie") != has_word(device, "pcie")) return false;
  const std::string a = memory_size(gpu), b = memory_size(device);
  return a.empty() || b.empty() || a == b;
}

}  // namespace dpt
