// The one-sentence answer of a sweep report, written for the kind of question the
// scenario asks: a throughput ("how fast", "how does it scale"), memory ("does it
// fit"), cost ("how much", "cheapest"), time to train ("how long", or a target of
// samples within hours), or the best value of a swept field ("which bucket size").
#pragma once
#include <string>

#include "scenarios/scenario/sweep.hpp"

namespace dpt::report {

enum class QuestionKind { throughput, memory, cost, time_to_train, best_value };
const char* question_kind_name(QuestionKind k);

// The first rule that holds: a target of samples within hours -> time_to_train; the
// question mentions fitting or memory, or some point ran out of memory -> memory;
// it mentions cost, price or cheap -> cost; "how long", "time to train", hours or
// days -> time_to_train; a field other than hardware, strategy and GPU count is
// swept while the GPU count is fixed -> best_value; else throughput.
QuestionKind question_kind(const scenario::SweepResult& r);

// The answer for question_kind(r).
std::string sweep_answer(const scenario::SweepResult& r);
// The answer for a given kind (exposed for tests).
std::string sweep_answer(const scenario::SweepResult& r, QuestionKind kind);

// A question for a scenario whose fields the command line changed, so the report
// never asks the file's question above other hardware's results: "How do
// DataParallel and DDP scale resnet50 from 1 to 8 GPUs on dgx-h100?".
std::string question_for_points(const scenario::SweepResult& r);

}  // namespace dpt::report
