// The "matmul_coop" kernel (Vulkan targets with cooperative matrices:
// vulkan-nvidia, vulkan-amd): a contraction and its elementwise epilogue in
// one dispatch, on 16x16x16 cooperative matrices. The script ends with
// gpu.subgroup_mma_{load_matrix,compute,store_matrix}; IREE's SPIR-V
// lowering turns them into spirv.KHR.CooperativeMatrix{Load,MulAdd,Store}
// (SPV_KHR_cooperative_matrix). Compile-only here: lavapipe has none.
//
// Applies to a dispatch holding a linalg.fill, the contraction it
// initializes (matmul, batch_matmul, matmul with B transposed; f16
// operands, f16 or f32 accumulator) and an elementwise root reading the
// contraction's result, or the contraction alone. The optional steps
// ("tile", "epilogue_threads") are chosen per dispatch: with or without an
// epilogue.
//
// Layout of the work. A workgroup computes a TM x TN tile of the
// contraction (one batch element per workgroup), stepping over K by KT;
// each subgroup a WM x WN piece of it, (WM/16) x (WN/16) cooperative
// matrices kept across the whole K loop, its A and B matrices loaded
// straight from global memory each step (no workgroup-memory staging yet:
// Vulkan has no cp.async, and a plain staged copy was not built). After the
// loop the subgroups store their accumulators to the tile's C buffer
// (workgroup memory, or the output itself for a bare contraction whose
// accumulator type is the output's), and all threads apply the epilogue to
// it, TM*TN/threads elements each, straight to the output (cooperative
// matrices take no general elementwise ops).
//
// Tiles divide the shapes exactly (the chooser picks divisors,
// python/tilefuse/strategies/matmul_coop.py). The driver sets every
// attribute tagged `tilefuse.param`:
//   matmul_operand     position of the root's input the contraction produces
//   workgroup_tile     [TM, TN] per workgroup
//   k_tile             [0, 0, KT]: the K loop's step (a multiple of 16)
//   subgroup_tile      [WM, WN] per subgroup (multiples of 16;
//                      subgroups = (TM/WM) x (TN/WN))
//   epilogue_tile,     [re, 4]: a thread's piece of the epilogue and of the
//   fill_tile          accumulator's zero fill; (TM/re) * (TN/4) <= threads
//   epilogue_row       [1, 0]: the loop over a piece's rows, one 1 x 4 row
//                      per step (step "epilogue_threads" says why)
//   workgroup_dims, translation_info: [32 * TN/WN, TM/WM, 1] threads
//                      (subgroup x along threadIdx.x / 32, subgroup y along
//                      threadIdx.y), subgroup size 32
// (A batch loop adds a leading 1 to workgroup_tile, a leading 0 to k_tile,
// subgroup_tile, epilogue_tile and fill_tile, and #gpu.block<z> in front of
// the workgroup mapping.)
// Workgroup memory: TM*TN * sizeof(accumulator) for the C tile whenever
// there is an epilogue; none for a bare contraction.
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
  transform.named_sequence @tilefuse_matmul_coop_tile_epilogue(
      %func: !transform.any_op {transform.readonly}, %root: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op, !transform.any_op) {
    %product = transform.get_operand %root[0] {tilefuse.param = "matmul_operand"}
      : (!transform.any_op) -> !transform.any_value
    %matmul = transform.get_defining_op %product : (!transform.any_value) -> !transform.any_op
    %fill = transform.get_producer_of_operand %matmul[2] : (!transform.any_op) -> !transform.any_op
    %wg_matmul, %grid = transform.structured.tile_using_forall %matmul
        tile_sizes [64, 64] (mapping = [#gpu.block<y>, #gpu.block<x>])
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
  transform.named_sequence @tilefuse_matmul_coop_tile_bare(
      %func: !transform.any_op {transform.readonly}, %root: !transform.any_op {transform.consumed})
      -> (!transform.any_op, !transform.any_op, !transform.any_op) {
    %fill = transform.get_producer_of_operand %root[2] : (!transform.any_op) -> !transform.any_op
    %wg_matmul, %grid = transform.structured.tile_using_forall %root
        tile_sizes [64, 64] (mapping = [#gpu.block<y>, #gpu.block<x>])
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
  // re x 4 piece each (one SPIR-V vector per row). Left whole it would be
  // run by every thread over the whole tile. Each piece is then a loop over
  // its rows, one 1 x 4 row per step: a 2-D read of the accumulator tile
  // followed only by ops the cooperative-matrix conversion can express
  // (a relu's maximumf) was converted with them into
  // gpu.subgroup_mma_elementwise, which SPIR-V does not legalize; a row is
  // a 1-D vector once its unit dim is cast away, which it never takes.
  transform.named_sequence @tilefuse_matmul_coop_epilogue_threads(
      %epilogue: !transform.any_op {transform.consumed}) {
    %t_epilogue, %forall = transform.structured.tile_using_forall %epilogue
        tile_sizes [8, 4] (mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>])
        {tilefuse.param = "epilogue_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %row, %rows = transform.structured.tile_using_for %t_epilogue tile_sizes [1, 0]
        {tilefuse.param = "epilogue_row"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }

  transform.named_sequence @tilefuse_matmul_coop(%dispatch: !transform.any_op {transform.readonly}) {
    // Step 1. The root: the op whose result the dispatch stores (the
    // epilogue, or the contraction itself).
    %func, %root = transform.include @tilefuse_find_root failures(propagate) (%dispatch)
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)

    // Step 2. Workgroup tiles (with an epilogue or bare, above).
    %wg_matmul, %wg_fill, %wg_epilogue = transform.include @tilefuse_matmul_coop_tile_epilogue
        failures(propagate) (%func, %root) {tilefuse.step = "tile"}
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)

    // Step 3. The epilogue over threads (or nothing, bare: then the handle
    // is the contraction's, so this comes before the K loop consumes it).
    transform.include @tilefuse_matmul_coop_epilogue_threads failures(propagate) (%wg_epilogue)
        {tilefuse.step = "epilogue_threads"} : (!transform.any_op) -> ()

    // Step 4. The K loop, KT per step.
    %k_matmul, %k_loop = transform.structured.tile_using_for %wg_matmul tile_sizes [0, 0, 32]
        {tilefuse.param = "k_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // Step 5. The contraction over subgroups, WM x WN each: the unit the
    // cooperative matrices work on (vectorized after bufferization).
    %sg_matmul, %subgroups = transform.structured.tile_using_forall %k_matmul
        tile_sizes [32, 32] (mapping = [#gpu.warp<y>, #gpu.warp<x>])
        {tilefuse.param = "subgroup_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // The fill over all threads, not subgroups: a subgroup's vectors are run
    // by every lane until the mma conversion (matmul_mma.mlir found a fill on
    // warps stored its whole tile from every lane). Each thread stores a
    // re x 4 piece once; the K loop loads its accumulators from it.
    %t_fill, %fill_threads = transform.structured.tile_using_forall %wg_fill
        tile_sizes [8, 4] (mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>])
        {tilefuse.param = "fill_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)

    transform.annotate %k_loop "tilefuse.k_loop" : !transform.any_op

    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // Step 6. Vectorize. The f16 -> f32 extensions of the operands fold
    // into the vector.contract, which the cooperative matrix takes with
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

    // Step 7. Bufferize: the accumulator tile becomes a workgroup
    // allocation when the epilogue reads it (its type differs from the
    // output's, or the epilogue writes elsewhere).
    transform.iree.eliminate_empty_tensors %vfunc : (!transform.any_op) -> ()
    %bufferized = transform.iree.bufferize <{target_gpu}> %vfunc
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %bufferized : !transform.any_op

    // Step 8. Map the foralls onto workgroup ids, subgroups and threads; drop
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

    // Step 9. Cooperative matrices. prepare_vector_to_mma puts each
    // contract in the form the conversion takes (matmul_mma.mlir found that
    // without it the contracts silently stay FMAs). Unroll to 16x16x16
    // pieces; a barrier after the K loop (below); hoisting the
    // accumulator's reads and writes out of the K loop keeps it in
    // cooperative matrices across the loop; then convert:
    // transfer_reads become subgroup_mma_load_matrix (`transpose` for B as
    // [N, K]), contracts subgroup_mma_compute, the accumulator's writes
    // subgroup_mma_store_matrix.
    transform.apply_patterns to %nobar {
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_patterns to %nobar {
      transform.apply_patterns.iree.prepare_vector_to_mma
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_patterns to %nobar {
      transform.apply_patterns.iree.unroll_vectors_gpu_wmma_sync
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    // The subgroups' barrier ended up inside the K loop (the subgroup
    // forall is in it); hoisting moves the accumulator's stores after the
    // loop, so a barrier after the loop keeps the epilogue's reads of the
    // C tile after every subgroup's stores (without this step the kernel
    // had none there: kernel_refusal checks it).
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
    transform.iree.vector.vector_to_mma_conversion %fn <{use_wmma}> : (!transform.any_op) -> ()
    transform.apply_patterns to %fn {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %fn : !transform.any_op

    // Step 10. Finished: no further codegen pipeline, this workgroup size.
    %done = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.no_pipeline workgroup_size = [64, 2, 1]
        subgroup_size = 32> {tilefuse.param = "translation_info"} -> !transform.any_param
    transform.annotate %fn "translation_info" = %done
      : !transform.any_op, !transform.any_param

    // Step 11. Print the kernel: the driver checks it (kernel/verify.py).
    transform.print %fn : !transform.any_op
    transform.yield
  }
}
