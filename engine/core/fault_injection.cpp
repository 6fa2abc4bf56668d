// The planted-fault registry (see fault_injection.hpp): one bit per fault.
#include "engine/core/fault_injection.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace dpt {

namespace {

// Two 64-bit words: fault f is bit f mod 64 of word f / 64.
std::atomic<std::uint64_t> g_active[2] = {0, 0};

std::atomic<std::uint64_t>& word(Fault f) { return g_active[static_cast<unsigned>(f) / 64]; }
std::uint64_t bit(Fault f) { return std::uint64_t{1} << (static_cast<unsigned>(f) % 64); }

}  // namespace

const std::vector<Fault>& all_faults() {
  static const std::vector<Fault> faults = {
      Fault::dp_scatter_drops_last_chunk,
      Fault::dp_reduce_skips_last_replica,
      Fault::ddp_skip_divide,
      Fault::ddp_skip_last_bucket,
      Fault::ddp_skip_initial_broadcast,
      Fault::ring_skips_last_all_gather_step,
      Fault::predict_symmetric_node0_only,
      Fault::fluid_sim_unweighted_sharing,
      Fault::fidelity_per_rank_count,
      Fault::ddp_sync_inside_no_sync,
      Fault::ddp_accumulate_undivided,
      Fault::cost_half_activations_as_f64,
      Fault::predict_half_wire_as_f64,
      Fault::predict_every_op_at_f32_peak,
      Fault::trace_flow_unmatched,
      Fault::plan_powers_of_two_only,
      Fault::report_no_swept_columns,
      Fault::large_n_sweep_drops_own,
      Fault::large_n_cache_ignores_channels,
      Fault::nccl_latency_omitted,
      Fault::nccl_protocol_overhead_omitted,
      Fault::nccl_tuner_slowest_small,
      Fault::nccl_channel_cap_omitted,
      Fault::nccl_shm_overhead_omitted,
      Fault::comm_hook_skip_divide,
      Fault::checkpoint_no_recompute,
      Fault::checkpoint_keeps_activations,
      Fault::ddp_unfused_divide,
      Fault::opclass_ignores_bytes,
      Fault::interference_speeds_compute,
      Fault::nccl_shm_duplex_cap_omitted,
      Fault::nccl_tree_chunk_fixed,
      Fault::large_n_head_prefix_uncut,
      Fault::large_n_repeat_owner_unshifted,
      Fault::grad_scaler_steps_on_inf,
      Fault::autocast_output_unrounded,
      Fault::autocast_bias_unrounded,
      Fault::calibrate_fits_nvls,
      Fault::gloo_one_segment_per_rank,
      Fault::profile_scale_ignored,
      Fault::schedule_memo_ignores_channels,
      Fault::ring_lock_step_latency,
      Fault::op_efficiency_ignores_compute_type,
      Fault::staged_copies_at_link_rate,
      Fault::conv_nchw_transposes_free,
      Fault::foreach_one_launch_per_op,
      Fault::memory_bound_traffic_ignored,
      Fault::platform_route_node0_links,
      Fault::gloo_cache_warm_rate,
      Fault::gloo_core_contention_omitted,
      Fault::nccl_nvls_rounds_ignored,
      Fault::calibrate_trusts_broken_logs,
      Fault::bench_one_rank_free,
      Fault::nccl_tests_launch_free,
      Fault::net_rails_one_nic,
      Fault::net_gdr_ignored,
      Fault::dp_flatten_per_tensor,
      Fault::dp_replica_loss_scatters_grad,
      Fault::dp_replica_grads_filled,
      Fault::platform_link_ids_shared_by_directions,
      Fault::nccl_channels_not_duplicated,
      Fault::nccl_version_ignored,
      Fault::spec_transformer_traffic_uncounted,
      Fault::gemm_wave_quantization_ignored,
      Fault::large_n_sweep_split_skips_half,
      Fault::nccl_nvls_tree_off,
      Fault::nvls_tree_one_head,
      Fault::nvls_tree_fold_unscaled,
      Fault::platform_cross_route_rep_links,
      Fault::platform_mirror_counterpart_shifted,
      Fault::fluid_sim_gate_ignored,
      Fault::nccl_tree_one_piece_in_flight,
      Fault::tree_one_tree_per_nic,
      Fault::ring_nvlink_paths_unbalanced,
      Fault::nccl_p2p_through_any_cpu,
      Fault::channels_last_transposes_charged,
      Fault::autocast_f32_traffic_low,
      Fault::autocast_casts_free,
      Fault::conv_roofline_aggregated,
      Fault::fidelity_completion_order,
      Fault::attention_bmms_in_layer_roofline,
      Fault::roofline_max_at_ridge,
      Fault::op_class_breakdown_drops_memory_bound,
      Fault::tf32_convs_forced,
      Fault::resident_inputs_copied,
      Fault::host_copy_counted_as_collective,
      Fault::init_wrapper_prefix_kept,
      Fault::accumulation_baseline_one_micro_batch,
      Fault::nccl_net_path_line_rate,
      Fault::nccl_forced_protocol_swapped,
      Fault::nccl_nvlink_ring_outside_communicator,
      Fault::interference_share_compounded,
      Fault::plan_ranks_by_hourly_price,
      Fault::merge_ignores_run_settings,
      Fault::nccl_ll_ceiling_per_channel,
      Fault::sdpa_causal_blocks_charged,
      Fault::sdpa_backward_no_recompute,
      Fault::sdpa_scores_saved,
      Fault::sdpa_tf32_allowed,
      Fault::master_weights_free,
      Fault::nvlink_pairs_ring_closed,
      Fault::calibrate_fits_below_plateau,
      Fault::comm_hook_recasts_half_buckets,
      Fault::nccl_p2p_disable_ignored,
      Fault::shm_root_port_unshared,
  };
  return faults;
}

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::dp_scatter_drops_last_chunk: return "drop-chunk";
    case Fault::dp_reduce_skips_last_replica: return "dp-skip-last-replica";
    case Fault::ddp_skip_divide: return "skip-divide";
    case Fault::ddp_skip_last_bucket: return "ddp-skip-last-bucket";
    case Fault::ddp_skip_initial_broadcast: return "ddp-skip-initial-broadcast";
    case Fault::ring_skips_last_all_gather_step: return "ring-step";
    case Fault::predict_symmetric_node0_only: return "symmetric-node0";
    case Fault::fluid_sim_unweighted_sharing: return "fluid-unweighted";
    case Fault::fidelity_per_rank_count: return "fidelity-per-rank-count";
    case Fault::ddp_sync_inside_no_sync: return "ddp-sync-inside-no-sync";
    case Fault::ddp_accumulate_undivided: return "ddp-accumulate-undivided";
    case Fault::cost_half_activations_as_f64: return "half-activations-f64";
    case Fault::predict_half_wire_as_f64: return "half-wire-f64";
    case Fault::predict_every_op_at_f32_peak: return "every-op-f32-peak";
    case Fault::trace_flow_unmatched: return "trace-flow-unmatched";
    case Fault::plan_powers_of_two_only: return "plan-powers-of-two";
    case Fault::report_no_swept_columns: return "report-no-swept-columns";
    case Fault::large_n_sweep_drops_own: return "sweep-drops-own";
    case Fault::large_n_cache_ignores_channels: return "cache-ignores-channels";
    case Fault::nccl_latency_omitted: return "nccl-no-latency";
    case Fault::nccl_protocol_overhead_omitted: return "nccl-proto-free";
    case Fault::nccl_tuner_slowest_small: return "nccl-tuner-slowest";
    case Fault::nccl_channel_cap_omitted: return "nccl-no-channel-cap";
    case Fault::nccl_shm_overhead_omitted: return "nccl-shm-free";
    case Fault::comm_hook_skip_divide: return "comm-hook-skip-divide";
    case Fault::checkpoint_no_recompute: return "checkpoint-no-recompute";
    case Fault::checkpoint_keeps_activations: return "checkpoint-keeps-activations";
    case Fault::ddp_unfused_divide: return "ddp-unfused-divide";
    case Fault::opclass_ignores_bytes: return "opclass-ignores-bytes";
    case Fault::interference_speeds_compute: return "interference-speeds-compute";
    case Fault::nccl_shm_duplex_cap_omitted: return "nccl-shm-duplex-free";
    case Fault::nccl_tree_chunk_fixed: return "nccl-tree-chunk-fixed";
    case Fault::large_n_head_prefix_uncut: return "head-prefix-uncut";
    case Fault::large_n_repeat_owner_unshifted: return "repeat-owner-unshifted";
    case Fault::grad_scaler_steps_on_inf: return "grad-scaler-steps-on-inf";
    case Fault::autocast_output_unrounded: return "autocast-output-unrounded";
    case Fault::autocast_bias_unrounded: return "autocast-bias-unrounded";
    case Fault::calibrate_fits_nvls: return "calibrate-fits-nvls";
    case Fault::gloo_one_segment_per_rank: return "gloo-one-segment-per-rank";
    case Fault::profile_scale_ignored: return "profile-scale-ignored";
    case Fault::schedule_memo_ignores_channels: return "schedule-memo-ignores-channels";
    case Fault::ring_lock_step_latency: return "ring-lock-step-latency";
    case Fault::op_efficiency_ignores_compute_type: return "op-efficiency-ignores-type";
    case Fault::staged_copies_at_link_rate: return "staged-copies-at-link-rate";
    case Fault::conv_nchw_transposes_free: return "conv-nchw-transposes-free";
    case Fault::foreach_one_launch_per_op: return "foreach-one-launch-per-op";
    case Fault::memory_bound_traffic_ignored: return "memory-bound-traffic-ignored";
    case Fault::platform_route_node0_links: return "route-node0-links";
    case Fault::gloo_cache_warm_rate: return "gloo-cache-warm-rate";
    case Fault::gloo_core_contention_omitted: return "gloo-core-contention-omitted";
    case Fault::nccl_nvls_rounds_ignored: return "nvls-rounds-ignored";
    case Fault::calibrate_trusts_broken_logs: return "calibrate-trusts-broken-logs";
    case Fault::bench_one_rank_free: return "bench-one-rank-free";
    case Fault::nccl_tests_launch_free: return "nccl-tests-launch-free";
    case Fault::net_rails_one_nic: return "net-rails-one-nic";
    case Fault::net_gdr_ignored: return "net-gdr-ignored";
    case Fault::dp_flatten_per_tensor: return "dp-flatten-per-tensor";
    case Fault::dp_replica_loss_scatters_grad: return "dp-replica-loss-scatters-grad";
    case Fault::dp_replica_grads_filled: return "dp-replica-grads-filled";
    case Fault::platform_link_ids_shared_by_directions: return "platform-link-ids-shared-by-directions";
    case Fault::nccl_channels_not_duplicated: return "nccl-channels-not-duplicated";
    case Fault::nccl_version_ignored: return "nccl-version-ignored";
    case Fault::spec_transformer_traffic_uncounted: return "spec-transformer-traffic-uncounted";
    case Fault::gemm_wave_quantization_ignored: return "gemm-wave-quantization-ignored";
    case Fault::large_n_sweep_split_skips_half: return "sweep-split-skips-half";
    case Fault::nccl_nvls_tree_off: return "nccl-nvls-tree-off";
    case Fault::nvls_tree_one_head: return "nvls-tree-one-head";
    case Fault::nvls_tree_fold_unscaled: return "nvls-tree-fold-unscaled";
    case Fault::platform_cross_route_rep_links: return "cross-route-rep-links";
    case Fault::platform_mirror_counterpart_shifted: return "mirror-counterpart-shifted";
    case Fault::fluid_sim_gate_ignored: return "fluid-gate-ignored";
    case Fault::nccl_tree_one_piece_in_flight: return "tree-one-in-flight";
    case Fault::tree_one_tree_per_nic: return "tree-one-tree-per-nic";
    case Fault::ring_nvlink_paths_unbalanced: return "ring-nvlink-paths-unbalanced";
    case Fault::nccl_p2p_through_any_cpu: return "nccl-p2p-through-any-cpu";
    case Fault::channels_last_transposes_charged: return "channels-last-transposes-charged";
    case Fault::autocast_f32_traffic_low: return "autocast-f32-traffic-low";
    case Fault::autocast_casts_free: return "autocast-casts-free";
    case Fault::conv_roofline_aggregated: return "conv-roofline-aggregated";
    case Fault::fidelity_completion_order: return "fidelity-completion-order";
    case Fault::attention_bmms_in_layer_roofline: return "attention-bmms-in-layer-roofline";
    case Fault::roofline_max_at_ridge: return "roofline-max-at-ridge";
    case Fault::op_class_breakdown_drops_memory_bound: return "op-class-breakdown-drops-memory-bound";
    case Fault::tf32_convs_forced: return "tf32-convs-forced";
    case Fault::init_wrapper_prefix_kept: return "init-wrapper-prefix-kept";
    case Fault::accumulation_baseline_one_micro_batch: return "accumulation-baseline-one-micro-batch";
    case Fault::nccl_net_path_line_rate: return "nccl-net-path-line-rate";
    case Fault::nccl_forced_protocol_swapped: return "nccl-forced-protocol-swapped";
    case Fault::nccl_nvlink_ring_outside_communicator: return "nvlink-ring-outside-communicator";
    case Fault::interference_share_compounded: return "interference-share-compounded";
    case Fault::plan_ranks_by_hourly_price: return "plan-ranks-by-hourly-price";
    case Fault::merge_ignores_run_settings: return "merge-ignores-run-settings";
    case Fault::resident_inputs_copied: return "resident-inputs-copied";
    case Fault::host_copy_counted_as_collective: return "host-copy-counted-as-collective";
    case Fault::nccl_ll_ceiling_per_channel: return "nccl-ll-ceiling-per-channel";
    case Fault::sdpa_causal_blocks_charged: return "sdpa-causal-blocks-charged";
    case Fault::sdpa_backward_no_recompute: return "sdpa-backward-no-recompute";
    case Fault::sdpa_scores_saved: return "sdpa-scores-saved";
    case Fault::sdpa_tf32_allowed: return "sdpa-tf32-allowed";
    case Fault::master_weights_free: return "master-weights-free";
    case Fault::nvlink_pairs_ring_closed: return "nvlink-pairs-ring-closed";
    case Fault::calibrate_fits_below_plateau: return "calibrate-fits-below-plateau";
    case Fault::comm_hook_recasts_half_buckets: return "comm-hook-recasts-half-buckets";
    case Fault::nccl_p2p_disable_ignored: return "nccl-p2p-disable-ignored";
    case Fault::shm_root_port_unshared: return "shm-root-port-unshared";
    case Fault::fault_count_: break;
  }
  return "?";
}

Fault fault_from_name(std::string_view name) {
  std::string names;
  for (Fault f : all_faults()) {
    if (name == fault_name(f)) return f;
    names += names.empty() ? "" : ", ";
    names += fault_name(f);
  }
  throw std::invalid_argument("unknown planted fault '" + std::string(name) + "' (known: " + names + ")");
}

bool fault_active(Fault f) { return (word(f).load(std::memory_order_relaxed) & bit(f)) != 0; }

void set_fault(Fault f, bool on) {
  if (on) word(f).fetch_or(bit(f));
  else word(f).fetch_and(~bit(f));
}

ScopedFault::ScopedFault(Fault f) : fault_(f), was_(fault_active(f)) { set_fault(f, true); }
ScopedFault::~ScopedFault() { set_fault(fault_, was_); }

}  // namespace dpt
