// The "matmul" kernel: a contraction and its elementwise epilogue (bias,
// activation, residual) in one dispatch, register-blocked, FMA on vectors.
//
// Applies to a dispatch holding a linalg.fill, the contraction it
// initializes (a matmul, batch_matmul or vecmat, generalized by IREE before
// this runs) and an elementwise root reading the contraction's result, or
// the contraction alone. The optional steps ("tile", "epilogue_rows",
// "fill_rows", "k_rows") are chosen per dispatch by the chooser: with or
// without an epilogue, with or without an M loop. Each workgroup computes a
// TM x TN tile of the root (one batch element per workgroup); each thread a
// tm x tn tile of it, held in registers as tm rows of 1-D vectors across
// the K loop, and the epilogue is applied to those registers before the one
// store. Nothing goes through global memory between the contraction and its
// epilogue.
//
// Tiles divide the shapes exactly (the chooser picks divisors,
// python/tilefuse/strategies/matmul.py): every tensor between fill,
// contraction and epilogue is then static, all transfers are unmasked, and
// the K loop's reads and writes of the accumulator fold into loop-carried
// vectors. (With a masked tile this LLVM forwards neither the accumulator's
// first read nor the epilogue's read of the result, and bufferization copies
// the whole tile per thread: found by trying it.)
//
// The values below are the defaults for a 64x256x128 f32 matmul; the driver
// sets every attribute tagged `tilefuse.param`:
//   matmul_operand     position of the root's input the contraction produces
//   workgroup_tile     [TM, TN] of the root per workgroup
//   thread_tile        [tm, tn] of the root per thread
//   k_step             [0, 0, KS]: the K loop's step
//   rows, k_rows       [1, v] (v = vector width; k_rows adds K's 0): each
//                      thread's op split into one-row, v-wide pieces, then
//                      unrolled (SPIR-V takes 1-D vectors of at most 4)
//   m_unroll, n_unroll the trip counts of those two loops (tm, tn / v)
// (A batch loop adds a leading 1 to workgroup_tile and 0 to the others; no
// M loop drops the M entries.)
//   workgroup_dims, translation_info: [TN / tn, TM / tm, 1] threads
module attributes {transform.with_named_sequence} {
  transform.named_sequence private @tilefuse_find_root(%dispatch: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op)

  // Step "tile", with an epilogue: tile the root (the epilogue) to
  // workgroups, TM x TN each, and fuse the contraction, its fill and the
  // loads into the tile (a workgroup reads only the rows of A and columns of
  // B it needs); then to threads, tm x tn each, fusing the contraction and
  // fill again, so that the epilogue reads its own thread's accumulator
  // (registers), never memory. Yields the thread's contraction, fill and
  // epilogue.
  transform.named_sequence @tilefuse_matmul_tile_epilogue(
      %func: !transform.any_op {transform.readonly}, %root: !transform.any_op {transform.consumed})
      -> (!transform.any_op, !transform.any_op, !transform.any_op) {
    %product = transform.get_operand %root[0] {tilefuse.param = "matmul_operand"}
      : (!transform.any_op) -> !transform.any_value
    %matmul = transform.get_defining_op %product : (!transform.any_value) -> !transform.any_op
    %fill = transform.get_producer_of_operand %matmul[2] : (!transform.any_op) -> !transform.any_op
    %loads = transform.structured.match ops{["iree_tensor_ext.dispatch.tensor.load"]} in %func
      : (!transform.any_op) -> !transform.any_op
    %wg_root, %grid = transform.structured.tile_using_forall %root
        tile_sizes [32, 32] (mapping = [#gpu.block<y>, #gpu.block<x>])
        {tilefuse.param = "workgroup_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_matmul, %grid_1 = transform.structured.fuse_into_containing_op %matmul into %grid
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_fill, %grid_2 = transform.structured.fuse_into_containing_op %fill into %grid_1
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_loads, %grid_3 = transform.structured.fuse_into_containing_op %loads into %grid_2
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.iree.populate_workgroup_count_region_using_num_threads_slice %grid_3
      : (!transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    %t_root, %threads = transform.structured.tile_using_forall %wg_root
        tile_sizes [4, 4] (mapping = [#gpu.thread<y>, #gpu.thread<x>])
        {tilefuse.param = "thread_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %t_matmul, %threads_1 = transform.structured.fuse_into_containing_op %wg_matmul into %threads
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %t_fill, %threads_2 = transform.structured.fuse_into_containing_op %wg_fill into %threads_1
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    transform.yield %t_matmul, %t_fill, %t_root : !transform.any_op, !transform.any_op, !transform.any_op
  }

  // Step "tile", a bare contraction (the root itself): the same tiles, with
  // only the fill and the loads to fuse. Yields the thread's contraction
  // twice (as the epilogue too: step "epilogue_rows" skips it).
  transform.named_sequence @tilefuse_matmul_tile_bare(
      %func: !transform.any_op {transform.readonly}, %root: !transform.any_op {transform.consumed})
      -> (!transform.any_op, !transform.any_op, !transform.any_op) {
    %fill = transform.get_producer_of_operand %root[2] : (!transform.any_op) -> !transform.any_op
    %loads = transform.structured.match ops{["iree_tensor_ext.dispatch.tensor.load"]} in %func
      : (!transform.any_op) -> !transform.any_op
    %wg_matmul, %grid = transform.structured.tile_using_forall %root
        tile_sizes [32, 32] (mapping = [#gpu.block<y>, #gpu.block<x>])
        {tilefuse.param = "workgroup_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_fill, %grid_1 = transform.structured.fuse_into_containing_op %fill into %grid
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %wg_loads, %grid_2 = transform.structured.fuse_into_containing_op %loads into %grid_1
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.iree.populate_workgroup_count_region_using_num_threads_slice %grid_2
      : (!transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    %t_matmul, %threads = transform.structured.tile_using_forall %wg_matmul
        tile_sizes [4, 4] (mapping = [#gpu.thread<y>, #gpu.thread<x>])
        {tilefuse.param = "thread_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %t_fill, %threads_1 = transform.structured.fuse_into_containing_op %wg_fill into %threads
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    transform.yield %t_matmul, %t_fill, %t_matmul : !transform.any_op, !transform.any_op, !transform.any_op
  }

  // Steps "epilogue_rows", "fill_rows" and "k_rows": a thread's op in
  // one-row, v-wide pieces, the loops unrolled (innermost first, so that the
  // outer unroll copies an unrolled body). The epilogue's pieces then read
  // the accumulator pieces the contraction left in registers, and every
  // vector is 1-D. The _1d forms are for a contraction with no M loop
  // (M = 1: IREE's vecmat), where the thread's tile is one row already; a
  // bare contraction has no epilogue (@tilefuse_skip).
  transform.named_sequence @tilefuse_matmul_rows(%op: !transform.any_op {transform.consumed}) {
    %row, %m_loop, %n_loop = transform.structured.tile_using_for %op
        tile_sizes [1, 4] {tilefuse.param = "rows"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.loop.unroll %n_loop factor = 1 {tilefuse.param = "n_unroll"} : !transform.any_op
    transform.loop.unroll %m_loop factor = 4 {tilefuse.param = "m_unroll"} : !transform.any_op
    transform.yield
  }

  transform.named_sequence @tilefuse_matmul_rows_1d(%op: !transform.any_op {transform.consumed}) {
    %row, %n_loop = transform.structured.tile_using_for %op
        tile_sizes [4] {tilefuse.param = "rows"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.loop.unroll %n_loop factor = 1 {tilefuse.param = "n_unroll"} : !transform.any_op
    transform.yield
  }

  transform.named_sequence @tilefuse_matmul_k_rows(%op: !transform.any_op {transform.consumed}) {
    %row, %m_loop, %n_loop = transform.structured.tile_using_for %op
        tile_sizes [1, 4, 0] {tilefuse.param = "k_rows"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.loop.unroll %n_loop factor = 1 {tilefuse.param = "n_unroll"} : !transform.any_op
    transform.loop.unroll %m_loop factor = 4 {tilefuse.param = "m_unroll"} : !transform.any_op
    transform.yield
  }

  transform.named_sequence @tilefuse_matmul_k_rows_1d(%op: !transform.any_op {transform.consumed}) {
    %row, %n_loop = transform.structured.tile_using_for %op
        tile_sizes [4, 0] {tilefuse.param = "k_rows"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.loop.unroll %n_loop factor = 1 {tilefuse.param = "n_unroll"} : !transform.any_op
    transform.yield
  }

  transform.named_sequence private @tilefuse_skip(%handle: !transform.any_op {transform.readonly})

  transform.named_sequence @tilefuse_matmul(%dispatch: !transform.any_op {transform.readonly}) {
    // Step 1. The root: the op whose result the dispatch stores (the
    // epilogue, or the contraction itself).
    %func, %root = transform.include @tilefuse_find_root failures(propagate) (%dispatch)
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)

    // Step 2. Workgroup and thread tiles (the step chosen for the dispatch:
    // with an epilogue or bare, above).
    %t_matmul, %t_fill, %t_epilogue = transform.include @tilefuse_matmul_tile_epilogue
        failures(propagate) (%func, %root) {tilefuse.step = "tile"}
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)

    // Step 3. One op per output row and vector (the steps above): the
    // epilogue, the fill and the K step's contraction (step 4) are each
    // tiled into one-row, v-wide pieces. The row slices each writes are then
    // the ones the next reads (the folds of step 5 match them), and every
    // vector is 1-D (SPIR-V takes 1-D vectors of at most 4 elements).
    transform.include @tilefuse_matmul_rows failures(propagate) (%t_epilogue)
        {tilefuse.step = "epilogue_rows"} : (!transform.any_op) -> ()
    transform.include @tilefuse_matmul_rows failures(propagate) (%t_fill)
        {tilefuse.step = "fill_rows"} : (!transform.any_op) -> ()

    // Step 4. The K loop: per step, a tm x tn x KS contraction, in row
    // pieces. Tagged, since vectorizing (step 5) consumes every handle into
    // the function.
    %k_matmul, %k_loop = transform.structured.tile_using_for %t_matmul tile_sizes [0, 0, 4]
        {tilefuse.param = "k_step"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.annotate %k_loop "tilefuse.k_loop" : !transform.any_op
    transform.include @tilefuse_matmul_k_rows failures(propagate) (%k_matmul)
        {tilefuse.step = "k_rows"} : (!transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // Step 5. Vectorize (every shape static: no masks). The generic
    // contraction comes out as a multiply and a multi_reduction;
    // reduction_to_contract makes it a vector.contract again, and the
    // transfers of one row slice written then read fold away.
    %vfunc = transform.structured.vectorize_children_and_apply_patterns %func
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.vector.reduction_to_contract
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %vfunc : !transform.any_op

    // Step 6. The accumulator rows: the K loop reads and writes the same row
    // slices of its carried tile every step; hoisting makes them
    // loop-carried vectors (registers), read before and written after it.
    %k_loop_again = transform.structured.match attributes {"tilefuse.k_loop"} in %vfunc
      : (!transform.any_op) -> !transform.any_op
    transform.loop.hoist_loop_invariant_subsets %k_loop_again : !transform.any_op
    transform.apply_patterns to %vfunc {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %vfunc : !transform.any_op

    // Step 7. Bufferize: the thread's epilogue writes straight into the
    // output binding.
    transform.iree.eliminate_empty_tensors %vfunc : (!transform.any_op) -> ()
    %bufferized = transform.iree.bufferize <{target_gpu}> %vfunc
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %bufferized : !transform.any_op

    // Step 8. Map the foralls onto workgroup ids and thread ids.
    transform.iree.forall_to_workgroup %bufferized : (!transform.any_op) -> ()
    transform.iree.map_nested_forall_to_gpu_threads %bufferized
        workgroup_dims = [8, 8, 1] subgroup_size = 8
        {tilefuse.param = "workgroup_dims"} : (!transform.any_op) -> ()

    // Step 9. Each contraction becomes outer products over K, each outer
    // product one vector.fma per row.
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.vector.lower_transpose
      transform.apply_patterns.vector.lower_broadcast
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %bufferized : !transform.any_op

    // Step 10. Finished: no further codegen pipeline, this workgroup size.
    %done = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.no_pipeline workgroup_size = [8, 8, 1]
        subgroup_size = 8> {tilefuse.param = "translation_info"} -> !transform.any_param
    transform.annotate %bufferized "translation_info" = %done
      : !transform.any_op, !transform.any_param

    // Step 11. Print the kernel: the driver checks it (kernel/verify.py).
    transform.print %bufferized : !transform.any_op
    transform.yield
  }
}
