// The "matmul_mma_iree" configuration (CUDA sm_80+): f16 or bf16 x the same
// -> f32 contractions and their elementwise epilogue on tensor cores
// (mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}...f32), compiled by
// IREE's own TileAndFuse pipeline with the tiles chosen here.
//
// Unlike the other scripts this is not a codegen strategy: @kernel_config
// runs @tilefuse_matmul_mma_iree on the dispatch's function (not as its
// codegen_spec), and it only sets IREE's configuration: a lowering_config
// naming the NV_MMA_SYNC_F32_16x8x16_F16 or _BF16 intrinsic on the contraction and
// a TileAndFuse translation_info on the function. IREE then tiles,
// promotes A and B to workgroup memory, distributes to warps, fuses the
// epilogue into the same kernel and lowers the intrinsic to mma.sync.
// Why not a script like matmul_mma.mlir: for f16 with f32 accumulators
// this ran more than twice as fast on an H100 (docs/gpu-results.md), and IREE 3.13's
// `vector_to_mma_conversion <use_mma_sync>` rejects bf16 (upstream MLIR's
// nvgpu::getMmaSyncRegisterType has no bf16 case: "'vector.transfer_read' op
// failed to convert op during vector-to-nvgpu conversion"), while IREE's
// iree_gpu.mma_layout path lowers the bf16 intrinsic (docs/findings.md,
// 'bf16 tensor cores through IREE's TileAndFuse pipeline').
//
// What IREE builds (1024^3 + bias + convert to bf16, 128x128 tile, sm_90):
// mma.sync bf16, A and B staged through workgroup memory and read back with
// plain ld.shared (no ldmatrix, no cp.async: IREE's pipeline emits neither
// on NVIDIA), the next K step's global loads prefetched into registers
// (prefetch_num_stages = 2), the epilogue on the accumulators in registers.
//
// The values below are the defaults for a 1024^3 matmul with an epilogue;
// the driver sets every attribute tagged `tilefuse.param`
// (python/tilefuse/strategies/matmul_mma_iree.py):
//   matmul_operand   position of the root's input the contraction produces
//                    (step "contraction": the root itself when bare)
//   lowering_config  workgroup = [TM, TN, 0] (a leading 1 with a batch loop),
//                    subgroup = [WM/16, WN/8, 0] (a warp's piece in
//                    m16 x n8 intrinsics), reduction = [0, 0, KT/16]
//   translation_info TileAndFuse, workgroup_size = [32 * warps, 1, 1]
module attributes {transform.with_named_sequence} {
  transform.named_sequence private @tilefuse_find_root(%dispatch: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op)
  transform.named_sequence private @tilefuse_pass(%handle: !transform.any_op {transform.readonly})
      -> !transform.any_op

  // Step "contraction", with an epilogue: the contraction is the producer
  // of the root's `matmul_operand`.
  transform.named_sequence @tilefuse_matmul_mma_iree_contraction(
      %root: !transform.any_op {transform.readonly}) -> !transform.any_op {
    %product = transform.get_operand %root[0] {tilefuse.param = "matmul_operand"}
      : (!transform.any_op) -> !transform.any_value
    %matmul = transform.get_defining_op %product : (!transform.any_value) -> !transform.any_op
    transform.yield %matmul : !transform.any_op
  }

  transform.named_sequence @tilefuse_matmul_mma_iree(%func: !transform.any_op {transform.readonly}) {
    // The root: the op whose result the dispatch stores (the epilogue, or
    // the contraction itself).
    %f, %root = transform.include @tilefuse_find_root failures(propagate) (%func)
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %matmul = transform.include @tilefuse_matmul_mma_iree_contraction failures(propagate) (%root)
        {tilefuse.step = "contraction"} : (!transform.any_op) -> !transform.any_op
    // (NV_MMA_SYNC intrinsics need convert_acc_gemm in this IREE: its own
    // configuration always sets it for them.)
    %config = transform.param.constant #iree_gpu.lowering_config<{convert_acc_gemm,
        mma_kind = #iree_gpu.mma_layout<NV_MMA_SYNC_F32_16x8x16_BF16>, promote_operands = [0, 1],
        reduction = [0, 0, 4], subgroup = [4, 4, 0], workgroup = [128, 128, 0]}>
        {tilefuse.param = "lowering_config"} -> !transform.any_param
    transform.annotate %matmul "lowering_config" = %config : !transform.any_op, !transform.any_param
    %info = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_gpu.pipeline<TileAndFuse> workgroup_size = [256, 1, 1] subgroup_size = 32,
        {gpu_pipeline_options = #iree_gpu.pipeline_options<prefetch_num_stages = 2,
        no_reduce_shared_memory_bank_conflicts = false, use_igemm_convolution = false>}>
        {tilefuse.param = "translation_info"} -> !transform.any_param
    transform.annotate %f "translation_info" = %info : !transform.any_op, !transform.any_param
    transform.yield
  }
}
