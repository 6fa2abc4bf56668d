// The layer a kernel belongs to, for traces (as PyTorch's profiler labels ops with
// their module through record_function): a layer opens a ScopedOp around the one
// kernel it charges; the twin's device takes (and clears) current_op_scope() when the
// kernel is submitted, before its actor can yield, and copies it into the trace
// event's args. Per thread; the pointers must outlive the scope (a layer's strings).
// Scopes do not nest: the destructor clears the scope.
#pragma once

namespace dpt {

struct OpScope {
  const char* layer = nullptr;     // module name: "layer1.0", "h.11"
  const char* op_class = nullptr;  // module type: "Conv2d+BatchNorm2d+ReLU", "GPT2Block"
  const char* pass = nullptr;      // "forward" or "backward"
};

inline OpScope& current_op_scope() {
  thread_local OpScope scope;
  return scope;
}

class ScopedOp {
 public:
  ScopedOp(const char* layer, const char* op_class, const char* pass) { current_op_scope() = {layer, op_class, pass}; }
  ~ScopedOp() { current_op_scope() = {}; }
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;
};

}  // namespace dpt
