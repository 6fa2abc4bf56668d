// Planted faults: deliberate bugs that tests and `dptwin verify --inject-bug` switch on
// to show that a property catches them. Each is checked where the fault happens
// (`if (fault_active(Fault::x))`), so no public signature carries a planted-bug flag
// and code that does not plant one cannot tell the mechanism exists. All are off
// unless switched on; the switch is process-wide (a forked simulation inherits it), so
// switch faults on before starting the threads or processes that should see them.
#pragma once
#include <atomic>
#include <string_view>
#include <vector>

namespace dpt {

enum class Fault : unsigned {
  dp_scatter_drops_last_chunk,      // "drop-chunk": DataParallel never computes the last chunk
  dp_reduce_skips_last_replica,     // "dp-skip-last-replica": the last replica's gradients are lost
  ddp_skip_divide,                  // "skip-divide": DDP's gradients summed, not averaged
  ddp_skip_last_bucket,             // "ddp-skip-last-bucket": the last bucket is never all-reduced
  ddp_skip_initial_broadcast,       // "ddp-skip-initial-broadcast": ranks keep their own parameters
  ring_skips_last_all_gather_step,  // "ring-step": the host ring's all-gather omits its last step
  predict_symmetric_node0_only,     // "symmetric-node0": symmetric collectives timed for node 0 alone
  fluid_sim_unweighted_sharing,     // "fluid-unweighted": max-min shares ignore the 1/latency weights
  fidelity_per_rank_count,          // "fidelity-per-rank-count": fidelity's all-gather/reduce-scatter pass one rank's count
  ddp_sync_inside_no_sync,          // "ddp-sync-inside-no-sync": no_sync ignored, every backward all-reduces
  ddp_accumulate_undivided,         // "ddp-accumulate-undivided": accumulation sums K micro-batch means
  cost_half_activations_as_f64,     // "half-activations-f64": bf16/f16 saved activations sized at 8 bytes
  predict_half_wire_as_f64,         // "half-wire-f64": bf16/f16 collectives move 8 bytes per element
  predict_every_op_at_f32_peak,     // "every-op-f32-peak": the precision ignored, every op at the f32 (f64) peak
  trace_flow_unmatched,             // "trace-flow-unmatched": a flow's finish event carries another id
  plan_powers_of_two_only,          // "plan-powers-of-two": plans try only 1, 2, 4, ... GPUs
  report_no_swept_columns,          // "report-no-swept-columns": swept fields get no column in reports
  large_n_sweep_drops_own,          // "sweep-drops-own": a swept link load leaves out the transfer's own bytes
  large_n_cache_ignores_channels,     // "cache-ignores-channels": large-N rank sets cached without their channel count
  nccl_latency_omitted,             // "nccl-no-latency": collectives skip NCCL's latency term
  nccl_protocol_overhead_omitted,   // "nccl-proto-free": LL/LL128 flag bytes never reach the wire
  nccl_tuner_slowest_small,         // "nccl-tuner-slowest": below 64 KiB the tuner picks its slowest pair
  nccl_channel_cap_omitted,         // "nccl-no-channel-cap": flows ignore NCCL's per-channel bandwidth
  nccl_shm_overhead_omitted,        // "nccl-shm-free": paths through an Intel root complex cost no overhead
  comm_hook_skip_divide,            // "comm-hook-skip-divide": the compress hooks all-reduce without dividing by the world size
  checkpoint_no_recompute,          // "checkpoint-no-recompute": checkpointed segments keep their activations, no recompute
  checkpoint_keeps_activations,     // "checkpoint-keeps-activations": segments save a copy of their input and free nothing
  ddp_unfused_divide,               // "ddp-unfused-divide": DDP's division by the world size as a copy plus a scale kernel
  opclass_ignores_bytes,            // "opclass-ignores-bytes": memory-bound op classes charged their FLOPs only
  interference_speeds_compute,      // "interference-speeds-compute": compute overlapping NCCL kernels credited, not slowed
  nccl_shm_duplex_cap_omitted,      // "nccl-shm-duplex-free": SHM rings ignore the host-staged bidirectional rate
  nccl_tree_chunk_fixed,            // "nccl-tree-chunk-fixed": tree LL128 pipelines full 576,000-byte chunks at every size
  large_n_head_prefix_uncut,        // "head-prefix-uncut": a tree head shorter than the kept graph placed with all its pieces
  large_n_repeat_owner_unshifted,   // "repeat-owner-unshifted": a repeated incidence's copies owned by copy 0's transfers
  grad_scaler_steps_on_inf,         // "grad-scaler-steps-on-inf": GradScaler steps on an inf/NaN gradient and keeps its scale
  autocast_output_unrounded,        // "autocast-output-unrounded": autocast Linear outputs left in f32, not rounded to bf16/f16
  autocast_bias_unrounded,          // "autocast-bias-unrounded": autocast Linear adds its f32 bias, not the bf16/f16 cast autocast makes
  calibrate_fits_nvls,              // "calibrate-fits-nvls": calibrate fits a link efficiency to an all-reduce size the twin runs with NVLS
  gloo_one_segment_per_rank,        // "gloo-one-segment-per-rank": gloo's ring cut into N segments, not at least 2N
  profile_scale_ignored,            // "profile-scale-ignored": measured layer times not scaled to another GPU kind
  schedule_memo_ignores_channels,   // "schedule-memo-ignores-channels": schedule_latency's memo keyed without channels
  ring_lock_step_latency,           // "ring-lock-step-latency": a ring's steps each pay its slowest hop, not its path's
  op_efficiency_ignores_compute_type,  // "op-efficiency-ignores-type": per-compute-type op-class fractions ignored
  staged_copies_at_link_rate,  // "staged-copies-at-link-rate": GPU-to-GPU copies without P2P run at the links' rate
  conv_nchw_transposes_free,        // "conv-nchw-transposes-free": Tensor Core convs on NCHW pay no layout transposes
  foreach_one_launch_per_op,        // "foreach-one-launch-per-op": a foreach optimizer op charged one launch, not multi_tensor_apply's
  memory_bound_traffic_ignored,     // "memory-bound-traffic-ignored": a layer's counted memory-bound traffic ignored
  platform_route_node0_links,       // "route-node0-links": a node's route carried over from node 0 keeps node 0's links
  gloo_cache_warm_rate,             // "gloo-cache-warm-rate": gloo's TCP rate ignores the buffer's size (cache-warm for all)
  gloo_core_contention_omitted,     // "gloo-core-contention-omitted": gloo's CPU work overlaps compute for free
  nccl_nvls_rounds_ignored,         // "nvls-rounds-ignored": one-node NVLS pipelines 512 KiB pieces, no gather stage
  calibrate_trusts_broken_logs,     // "calibrate-trusts-broken-logs": calibrate fits logs with wrong results or beyond the hardware
  bench_one_rank_free,              // "bench-one-rank-free": a one-rank bench call copies nothing (launch time alone)
  nccl_tests_launch_free,           // "nccl-tests-launch-free": the bench's host thread launches kernels for free
  net_rails_one_nic,                // "net-rails-one-nic": every ring channel crosses the nodes through the same GPU and NIC
  net_gdr_ignored,                  // "net-gdr-ignored": without GPUDirect RDMA the NIC still reaches GPU memory directly
  dp_flatten_per_tensor,            // "dp-flatten-per-tensor": DataParallel flattens and unflattens with a copy kernel per tensor
  dp_replica_loss_scatters_grad,    // "dp-replica-loss-scatters-grad": a module-computed loss still scatters the gathered outputs' gradient
  dp_replica_grads_filled,          // "dp-replica-grads-filled": shape-only replicas pay a fill kernel per gradient every step
  platform_link_ids_shared_by_directions,  // "platform-link-ids-shared-by-directions": a split-duplex link's UP and DOWN get one dense id
  nccl_channels_not_duplicated,     // "nccl-channels-not-duplicated": NCCL runs as many channels as its ring graph found, not twice as many
  nccl_version_ignored,             // "nccl-version-ignored": the collective model uses NCCL master's tuner constants whatever the hardware's nccl_version says
  spec_transformer_traffic_uncounted,  // "spec-transformer-traffic-uncounted": spec and config.json transformers carry no counted memory-bound traffic
  gemm_wave_quantization_ignored,  // "gemm-wave-quantization-ignored": a GEMM's partial last wave of output tiles costs nothing
  large_n_sweep_split_skips_half,  // "sweep-split-skips-half": a sweep split between two threads leaves the second thread's links unswept
  nccl_nvls_tree_off,               // "nccl-nvls-tree-off": NCCL's tuner never runs NVLS-tree across NVLink SHARP nodes
  nvls_tree_one_head,               // "nvls-tree-one-head": every NVLS-tree channel leaves a node through its first GPU and NIC
  nvls_tree_fold_unscaled,          // "nvls-tree-fold-unscaled": the rail fold counts head 0's loads alone (no other head's on shared switch ports or fabric links)
  platform_cross_route_rep_links,   // "cross-route-rep-links": a route across nodes carried over from its representative keeps the far node's and uplinks' links
  platform_mirror_counterpart_shifted,  // "mirror-counterpart-shifted": a mirrored node's link takes its name and figures from node 0's link one position on
  fluid_sim_gate_ignored,           // "fluid-gate-ignored": a transfer's bytes flow once its latency is paid, before the piece ahead of it on its edge has ended (no FIFO)
  nccl_tree_one_piece_in_flight,    // "tree-one-in-flight": NCCL-model trees keep one piece in flight per hop (each piece pays its hop latency in series), not NCCL_STEPS
  tree_one_tree_per_nic,            // "tree-one-tree-per-nic": tree channel c leaves each node through head c, so each NIC carries one tree of the two (a node interior in it loads its NIC 3x, the others 1x)
  ring_nvlink_paths_unbalanced,     // "ring-nvlink-paths-unbalanced": a rail-aligned ring on direct NVLink runs its node's ranks in cycle order, ignoring which NVLink pairs it crosses and which links earlier channels took
  nccl_p2p_through_any_cpu,         // "nccl-p2p-through-any-cpu": NCCL runs P2P wherever the driver allows it, ignoring its p2pLevel (SHM through Intel root complexes, and in master through any CPU but a 2-GPU AMD system's)
  channels_last_transposes_charged,  // "channels-last-transposes-charged": Tensor Core convs on channels_last tensors still pay NCHW<->NHWC transposes
  autocast_f32_traffic_low,         // "autocast-f32-traffic-low": a layer's autocast-f32 memory-bound elements move at the low type's size
  autocast_casts_free,              // "autocast-casts-free": autocast's f32<->low casts of activations and weights cost nothing
  conv_roofline_aggregated,         // "conv-roofline-aggregated": a layer's convolutions take one roofline over their summed FLOPs and bytes, not one each
  fidelity_completion_order,        // "fidelity-completion-order": dptwin fidelity --jobs lists results in the order its workers finish, not the table's
  attention_bmms_in_layer_roofline,  // "attention-bmms-in-layer-roofline": a layer's attention batched matmuls run inside its one GEMM roofline, their score reads and writes free
  roofline_max_at_ridge,            // "roofline-max-at-ridge": a compute-bound kernel takes max(compute, memory) time, as if the two overlapped fully at its ridge
  op_class_breakdown_drops_memory_bound,  // "op-class-breakdown-drops-memory-bound": the step report's kernel time by op class leaves out memory-bound kernels
  tf32_convs_forced,                // "tf32-convs-forced": an f32 convolution always runs on TF32 Tensor Cores with the NCHW transposes, even where cuDNN's FP32 kernels are faster
  resident_inputs_copied,           // "resident-inputs-copied": a batch resident on the device (StrategyOptions::inputs_resident) is copied from the host every step all the same
  host_copy_counted_as_collective,  // "host-copy-counted-as-collective": the twin's breakdown counts host<->device copies as collective time (no exposed_host_copy)
  init_wrapper_prefix_kept,         // "init-wrapper-prefix-kept": dp and ddp load a DataParallel/DDP checkpoint given as --init with its 'module.' keys, into the unwrapped module
  accumulation_baseline_one_micro_batch,  // "accumulation-baseline-one-micro-batch": scaling efficiency under accumulation against one GPU's one-micro-batch step
  nccl_net_path_line_rate,          // "nccl-net-path-line-rate": NCCL's search takes a GPU's path to its NIC at the NIC's line rate, past the PCIe link between them
  nccl_forced_protocol_swapped,     // "nccl-forced-protocol-swapped": a forced protocol NCCL would run (LL128 over PCIe) or refuse (NVLS with LL) is swapped for the tuner's own
  nccl_nvlink_ring_outside_communicator,  // "nvlink-ring-outside-communicator": NCCL's ring graph counts the NVLink links of every GPU of the node, the communicator's or not
  interference_share_compounded,    // "interference-share-compounded": a kernel overlapping a collective loses share / (1 - share) of the overlap, as if the collective outlasted it
  plan_ranks_by_hourly_price,       // "plan-ranks-by-hourly-price": a plan with train_samples ranks by price per hour, not by the run's total cost
  merge_ignores_run_settings,       // "merge-ignores-run-settings": merge joins shards run with different flags, hardware files or dptwin builds
  nccl_ll_ceiling_per_channel,      // "nccl-ll-ceiling-per-channel": ring LL's llMaxBw ceiling is spread over every runtime channel, so the few channels a small operation launches carry a sliver of it
  sdpa_causal_blocks_charged,       // "sdpa-causal-blocks-charged": a causal fused attention kernel is charged the masked half of the scores too
  sdpa_backward_no_recompute,       // "sdpa-backward-no-recompute": a fused attention kernel's backward is charged 2x its forward, as if it kept the scores
  sdpa_scores_saved,                // "sdpa-scores-saved": a transformer built with sdpa attention still saves eager attention's s x s probabilities and dropout mask
  sdpa_tf32_allowed,                // "sdpa-tf32-allowed": fused attention under --precision tf32 runs at TF32's peak, as if allow_tf32 reached the memory-efficient kernel
  master_weights_free,              // "master-weights-free": f16-master's optimizer keeps its master weights, master gradients and state in f16, as if no f32 copy were held
  nvlink_pairs_ring_closed,         // "nvlink-pairs-ring-closed": NCCL's ring taken as NVLink whenever every GPU has a link, though the pairs close no ring (bridged PCIe cards)
  calibrate_fits_below_plateau,     // "calibrate-fits-below-plateau": calibrate fits a link rate at a size where the twin's ring still ramps
  comm_hook_recasts_half_buckets,   // "comm-hook-recasts-half-buckets": a compress hook casts (and copies) a bucket already in its dtype
  nccl_p2p_disable_ignored,         // "nccl-p2p-disable-ignored": NCCL_P2P_DISABLE=1 (nccl_p2p_disable) leaves NVLink, NVSwitch and PCIe P2P in use
  shm_root_port_unshared,           // "shm-root-port-unshared": GPUs behind one PCIe switch each get a root port's host-staged rate
  fault_count_,  // not a fault: how many there are (one bit each in two 64-bit words)
};
static_assert(static_cast<unsigned>(Fault::fault_count_) <= 128, "planted faults are bits of two 64-bit words");

// Every fault, in declaration order.
const std::vector<Fault>& all_faults();
// Its name as above ("drop-chunk", ...).
const char* fault_name(Fault f);
// The fault with that name; throws std::invalid_argument naming the value and every name.
Fault fault_from_name(std::string_view name);

// Whether the fault is switched on (cheap: one relaxed atomic load).
bool fault_active(Fault f);
// Switches a fault on or off process-wide.
void set_fault(Fault f, bool on);

// Switches a fault on for its lifetime, then restores its previous state.
class ScopedFault {
 public:
  explicit ScopedFault(Fault f);
  ~ScopedFault();
  ScopedFault(const ScopedFault&) = delete;
  ScopedFault& operator=(const ScopedFault&) = delete;

 private:
  Fault fault_;
  bool was_;
};

}  // namespace dpt
