// The "matmul_mma" kernel (CUDA sm_80+): a contraction and its elementwise
// epilogue in one dispatch, on tensor cores: nvgpu.mma.sync (m16n8k16),
// operands staged through shared memory by cp.async in a multi-stage
// pipeline and read back with ldmatrix.
//
// Applies to a dispatch holding a linalg.fill, the contraction it
// initializes (matmul, batch_matmul, matmul with B transposed; f16
// operands, f16 or f32 accumulator; bf16 operands are rejected by the
// mma.sync conversion in 3.13, with an error) and an elementwise
// root reading the contraction's result, or the contraction alone. The
// optional steps ("tile", "epilogue_threads") are chosen per dispatch: with
// or without an epilogue.
//
// Layout of the work. A workgroup computes a TM x TN tile of the
// contraction (one batch element per workgroup), stepping over K by KT.
// Each step, all threads copy the step's TM x KT slice of A and KT x TN
// slice of B into shared memory (16-byte cp.async, `depth` stages in
// flight); each warp then computes a WM x WN piece of the tile from shared
// memory (ldmatrix + mma.sync), its accumulators in registers across the
// whole K loop. After the loop the warps store their accumulators to the
// tile's C buffer (shared memory, or the output itself for a bare
// contraction whose accumulator type is the output's), and all threads
// apply the epilogue to it, TM*TN/threads elements each, straight to the
// output. (nvgpu's mma.sync conversion takes no elementwise ops on its
// fragments, so the epilogue cannot stay in registers.)
//
// Tiles divide the shapes exactly (the chooser picks divisors,
// python/tilefuse/strategies/matmul_mma.py): every
// tensor is static, every transfer unmasked, every cp.async 16 bytes.
//
// The values below are the defaults for a 1024^3 f16 matmul; the driver sets
// every attribute tagged `tilefuse.param`:
//   matmul_operand     position of the root's input the contraction produces
//   workgroup_tile     [TM, TN] per workgroup (TM % WM == 0, TN % WN == 0)
//   k_tile             [0, 0, KT]: the K loop's step (KT % 16 == 0; the
//                      chooser takes 32: with 16 the pipeliner left the
//                      loop unpipelined)
//   warp_tile          [WM, WN] per warp (WM % 16 == 0, WN % 8 == 0;
//                      warps = (TM/WM) x (TN/WN))
//   copy_a_tile        [ra, 8]: a thread's piece of A's TM x KT slice per
//                      step; (TM/ra) * (KT/8) must equal the thread count
//   copy_b_tile        [rb, 8]: the same for B's KT x TN slice (TN x KT when
//                      B is transposed: [rb, 8] over N x K)
//   epilogue_tile      [re, ce]: a thread's piece of the epilogue;
//                      (TM/re) * (TN/ce) <= the thread count; one row
//                      (re = 1) wherever a row holds whole pieces
//                      (matmul_mma.epilogue_piece says why)
//   epilogue_step      [1, 8]: a thread walks its epilogue piece 8
//                      elements (one row) at a time
//   fill_tile          [rf, cf]: a thread's piece of the accumulator's
//                      zero fill, as epilogue_tile
//   pipeline_depth,    stages of cp.async in flight, and the buffers per
//   multibuffer_depth  shared operand (the same number);
//                      at least 3: with 2 the pipeliner leaves the loop as it
//                      is (wait_group 0 each step, no error)
//   workgroup_dims, translation_info: [32 * TN/WN, TM/WM, 1] threads
//                      (warp x along threadIdx.x / 32, warp y along
//                      threadIdx.y), subgroup size 32
// (A batch loop adds a leading 1 to workgroup_tile, a leading 0 to k_tile,
// warp_tile, copy_a_tile, copy_b_tile, epilogue_tile, epilogue_step and fill_tile, and
// #gpu.block<z> in front of the workgroup mapping.)
// Shared memory: depth * (TM*KT + KT*TN) * 2 bytes for the operand stages,
// plus TM*TN * sizeof(accumulator) for the C tile whenever there is an
// epilogue (a bare contraction accumulates straight into the output).
module attributes {transform.with_named_sequence} {
  transform.named_sequence private @tilefuse_find_root(%dispatch: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op)
  transform.named_sequence private @tilefuse_skip(%handle: !transform.any_op {transform.readonly})

  // Step "tile", with an epilogue: tile the contraction (not the epilogue)
  // to workgroups and pull the epilogue into the same forall as a consumer.
  // With the epilogue as the tiled root, the contraction is fused as a
  // producer into it and bufferization then copied the whole output tile per
  // thread (shared/IREE_NOTES.md). Yields the workgroup's contraction, fill
  // and epilogue.
  transform.named_sequence @tilefuse_matmul_mma_tile_epilogue(
      %func: !transform.any_op {transform.readonly}, %root: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op, !transform.any_op) {
    %product = transform.get_operand %root[0] {tilefuse.param = "matmul_operand"}
      : (!transform.any_op) -> !transform.any_value
    %matmul = transform.get_defining_op %product : (!transform.any_value) -> !transform.any_op
    %fill = transform.get_producer_of_operand %matmul[2] : (!transform.any_op) -> !transform.any_op
    %wg_matmul, %grid = transform.structured.tile_using_forall %matmul
        tile_sizes [128, 128] (mapping = [#gpu.block<y>, #gpu.block<x>])
        {tilefuse.param = "workgroup_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_fill, %grid_1 = transform.structured.fuse_into_containing_op %fill into %grid
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    // The epilogue consumes the forall's result through its
    // parallel_insert_slice: fusing it there makes it read the tile, never
    // the whole contraction result.
    %insert = transform.structured.match ops{["tensor.parallel_insert_slice"]} in %grid_1
      : (!transform.any_op) -> !transform.any_op
    // (Results: the consumer as it was, then the fused copy in the forall.)
    %old_epilogue, %wg_epilogue = transform.iree.fuse_consumer %insert in (%grid_1)
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %grid_2 = transform.get_parent_op %wg_epilogue <{op_name = "scf.forall"}>
      : (!transform.any_op) -> !transform.any_op
    transform.iree.populate_workgroup_count_region_using_num_threads_slice %grid_2
      : (!transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    transform.yield %wg_matmul, %wg_fill, %wg_epilogue
      : !transform.any_op, !transform.any_op, !transform.any_op
  }

  // Step "tile", a bare contraction (the root itself): the same tiles, with
  // only the fill to fuse. Yields the contraction twice (as the epilogue
  // too: step "epilogue_threads" skips it).
  transform.named_sequence @tilefuse_matmul_mma_tile_bare(
      %func: !transform.any_op {transform.readonly}, %root: !transform.any_op {transform.consumed})
      -> (!transform.any_op, !transform.any_op, !transform.any_op) {
    %fill = transform.get_producer_of_operand %root[2] : (!transform.any_op) -> !transform.any_op
    %wg_matmul, %grid = transform.structured.tile_using_forall %root
        tile_sizes [128, 128] (mapping = [#gpu.block<y>, #gpu.block<x>])
        {tilefuse.param = "workgroup_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_fill, %grid_1 = transform.structured.fuse_into_containing_op %fill into %grid
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.iree.populate_workgroup_count_region_using_num_threads_slice %grid_1
      : (!transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    transform.yield %wg_matmul, %wg_fill, %wg_matmul
      : !transform.any_op, !transform.any_op, !transform.any_op
  }

  // Step "epilogue_threads": the epilogue spread over all threads, a
  // re x ce piece each, in 16-byte vector stores. Left whole it would be
  // run by every thread over the whole tile. A piece of one row keeps the
  // mma.sync conversion (step 10) off the epilogue's read of the
  // accumulator tile.
  transform.named_sequence @tilefuse_matmul_mma_epilogue_threads(
      %epilogue: !transform.any_op {transform.consumed}) {
    %t_epilogue, %forall = transform.structured.tile_using_forall %epilogue
        tile_sizes [16, 8] (mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>])
        {tilefuse.param = "epilogue_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // A loop over the piece, 8 elements at a time: a whole piece at once
    // (64 f32 values of an 8-warp 128x128 tile) kept a GELU epilogue's
    // temporaries for all of them live, 255 registers.
    %s_epilogue, %rows, %columns = transform.structured.tile_using_for %t_epilogue
        tile_sizes [1, 8] {tilefuse.param = "epilogue_step"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.yield
  }

  transform.named_sequence @tilefuse_matmul_mma(%dispatch: !transform.any_op {transform.readonly}) {
    // Step 1. The root: the op whose result the dispatch stores (the
    // epilogue, or the contraction itself).
    %func, %root = transform.include @tilefuse_find_root failures(propagate) (%dispatch)
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)

    // Step 2. Workgroup tiles (with an epilogue or bare, above).
    %wg_matmul, %wg_fill, %wg_epilogue = transform.include @tilefuse_matmul_mma_tile_epilogue
        failures(propagate) (%func, %root) {tilefuse.step = "tile"}
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)

    // Step 3. The epilogue over threads (or nothing, bare: then the handle
    // is the contraction's, so this comes before the K loop consumes it).
    transform.include @tilefuse_matmul_mma_epilogue_threads failures(propagate) (%wg_epilogue)
        {tilefuse.step = "epilogue_threads"} : (!transform.any_op) -> ()

    // Step 4. The K loop. Each step's A and B slices are copied into fresh
    // tensors (copy_tensor_operand): those become the shared-memory buffers
    // at bufferization, the copies the cp.asyncs.
    %k_matmul, %k_loop = transform.structured.tile_using_for %wg_matmul tile_sizes [0, 0, 32]
        {tilefuse.param = "k_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %copy_a = transform.iree.copy_tensor_operand %k_matmul [0]
      : (!transform.any_op) -> !transform.any_op
    %copy_b = transform.iree.copy_tensor_operand %k_matmul [1]
      : (!transform.any_op) -> !transform.any_op

    // Step 5. The copies over all threads, 8 elements (16 bytes: one
    // cp.async) per row of a thread's piece. Both foralls are flattened to
    // one linear thread dimension and fused into one, so that the K loop
    // holds a single copy phase: pipelining (step 11) needs exactly one
    // cp.async group, one wait and two barriers in the loop, and is
    // silently a no-op otherwise.
    %t_copy_a, %forall_a = transform.structured.tile_using_forall %copy_a
        tile_sizes [4, 8] (mapping = [#gpu.thread<linear_dim_0>, #gpu.thread<linear_dim_1>])
        {tilefuse.param = "copy_a_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %t_copy_b, %forall_b = transform.structured.tile_using_forall %copy_b
        tile_sizes [4, 8] (mapping = [#gpu.thread<linear_dim_0>, #gpu.thread<linear_dim_1>])
        {tilefuse.param = "copy_b_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %flat_a = transform.iree.flatten_forall_mapping %forall_a : (!transform.any_op) -> !transform.any_op
    %flat_b = transform.iree.flatten_forall_mapping %forall_b : (!transform.any_op) -> !transform.any_op
    %copies = transform.loop.fuse_sibling %flat_a into %flat_b
      : (!transform.any_op, !transform.any_op) -> !transform.any_op

    // Step 6. The contraction over warps, WM x WN each: the
    // unit mma.sync works on (vectorized after bufferization, step 8).
    %w_matmul, %warps = transform.structured.tile_using_forall %k_matmul
        tile_sizes [64, 64] (mapping = [#gpu.warp<y>, #gpu.warp<x>])
        {tilefuse.param = "warp_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // The fill over all threads, not warps: a warp's vectors are run by
    // every lane until the mma conversion, which takes only contract slices,
    // so a fill on warps stored its whole 64x64 tile from every lane (1088
    // st.shared). Tiled like the epilogue, each thread stores a 16 x 8 piece
    // once; the K loop reads its accumulators from it before the loop.
    %t_fill, %fill_threads = transform.structured.tile_using_forall %wg_fill
        tile_sizes [16, 8] (mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>])
        {tilefuse.param = "fill_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)

    transform.annotate %k_loop "tilefuse.k_loop" : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // Step 7. Vectorize. The f16 -> f32 (bf16 -> f32) extensions of the
    // operands fold into the vector.contract, which mma.sync takes with
    // mixed types.
    %vfunc = transform.structured.vectorize_children_and_apply_patterns %func
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.vector.fold_arith_extension
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %vfunc : !transform.any_op

    // Step 8. Bufferize: the copies' destinations become workgroup (shared)
    // allocations; so does the accumulator tile when the epilogue reads it
    // (its type differs from the output's, or the epilogue writes
    // elsewhere).
    transform.iree.eliminate_empty_tensors %vfunc : (!transform.any_op) -> ()
    %bufferized = transform.iree.bufferize <{target_gpu}> %vfunc
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %bufferized : !transform.any_op

    // Step 9. Map the foralls onto workgroup ids, warps and threads; drop
    // the barriers distribution put between phases that touch disjoint
    // memory.
    transform.iree.forall_to_workgroup %bufferized : (!transform.any_op) -> ()
    transform.iree.map_nested_forall_to_gpu_threads %bufferized
        workgroup_dims = [64, 2, 1] subgroup_size = 32
        {tilefuse.param = "workgroup_dims"} : (!transform.any_op) -> ()
    %nobar = transform.iree.eliminate_gpu_barriers %bufferized : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %nobar {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %nobar : !transform.any_op

    // Step 10. Tensor cores. prepare_vector_to_mma puts each contract in the
    // (m, k) x (n, k) form mma.sync takes (without it, unrolling leaves
    // contracts the conversion rejects and they lower to scalar fma.rn.f32:
    // silent). Unroll to m16n8k16 pieces; a barrier after the K loop keeps
    // the next phase off the shared buffers; hoisting the accumulator's
    // reads and writes out of the K loop keeps it in registers; then
    // convert: transfer_reads from shared memory become ldmatrix (x4, and
    // x4.trans for a K-major B), contracts mma.sync.
    transform.apply_patterns to %nobar {
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_patterns to %nobar {
      transform.apply_patterns.iree.prepare_vector_to_mma
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_patterns to %nobar {
      transform.apply_patterns.iree.unroll_vectors_gpu_mma_sync
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    %k_loop_1 = transform.structured.match attributes {"tilefuse.k_loop"} in %nobar
      : (!transform.any_op) -> !transform.any_op
    transform.iree.synchronize_loop %k_loop_1 : (!transform.any_op) -> ()
    transform.apply_patterns to %nobar {
      transform.apply_patterns.memref.fold_memref_alias_ops
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.iree.apply_licm %nobar : !transform.any_op
    transform.apply_patterns to %nobar {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %nobar : !transform.any_op
    %fn = transform.structured.hoist_redundant_vector_transfers %nobar
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %fn {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %fn : !transform.any_op
    transform.iree.vector.vector_to_mma_conversion %fn <{use_mma_sync}> : (!transform.any_op) -> ()
    transform.apply_patterns to %fn {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %fn : !transform.any_op

    // Step 11. The cp.async pipeline: one shared buffer per stage
    // (multibuffer; allocations used outside the K loop, like the
    // accumulator tile, are left alone), the copies as 16-byte
    // device_async_copy in one group per step, then software pipelining of
    // the K loop, `depth` stages.
    // (Bufferization left the shared buffers inside the K loop; multibuffer
    // wants them outside.)
    transform.iree.hoist_static_alloc %fn : (!transform.any_op) -> ()
    %allocs = transform.structured.match ops{["memref.alloc"]} in %fn
      : (!transform.any_op) -> !transform.op<"memref.alloc">
    transform.foreach %allocs : !transform.op<"memref.alloc"> {
    ^bb0(%alloc: !transform.op<"memref.alloc">):
      transform.sequence %alloc : !transform.op<"memref.alloc"> failures(suppress) {
      ^bb1(%one: !transform.op<"memref.alloc">):
        %mb = transform.memref.multibuffer %one <{factor = 3 : i64, skip_analysis}>
            {tilefuse.param = "multibuffer_depth"}
          : (!transform.op<"memref.alloc">) -> !transform.any_op
      }
    }
    transform.apply_patterns to %fn {
      transform.apply_patterns.vector.transfer_to_scf full_unroll = true max_transfer_rank = 1
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %fn : !transform.any_op
    transform.iree.create_async_groups %fn <{use_mma_sync}> : (!transform.any_op) -> ()
    transform.apply_patterns to %fn {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %fn : !transform.any_op
    // (Hoisting rebuilt the K loop without its mark: find it again as the
    // loop around the async copies.)
    %async_copies = transform.structured.match ops{["nvgpu.device_async_copy"]} in %fn
      : (!transform.any_op) -> !transform.any_op
    %k_loop_2 = transform.get_parent_op %async_copies <{deduplicate, op_name = "scf.for"}>
      : (!transform.any_op) -> !transform.any_op
    %pipelined = transform.iree.pipeline_shared_memory_copies %k_loop_2
        <{depth = 3, use_mma_sync}> {tilefuse.param = "pipeline_depth"}
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %fn {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %fn : !transform.any_op

    // Step 12. Finished: no further codegen pipeline, this workgroup size.
    %done = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.no_pipeline workgroup_size = [64, 2, 1]
        subgroup_size = 32> {tilefuse.param = "translation_info"} -> !transform.any_param
    transform.annotate %fn "translation_info" = %done
      : !transform.any_op, !transform.any_param

    // Step 13. Print the kernel: the driver checks it (kernel/verify.py).
    transform.print %fn : !transform.any_op
    transform.yield
  }
}
