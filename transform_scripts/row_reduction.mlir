// The "row_reduction" kernel: XLA's row-reduction emitter as a
// transform-dialect strategy.
//
// Applies to a dispatch whose root linalg.generic reduces its innermost
// dimension (a row), with elementwise producers (converts, exp, ...) fused in.
// One workgroup reduces one row (the parallel dims go to the grid). Its T
// threads read the row as C chunks of T*V elements: thread t owns the V
// columns at t*V of every chunk, so a subgroup reads one contiguous run of
// memory per chunk (coalesced, 128-bit loads), and keeps a V-wide running
// partial in registers while it walks the chunks. The loop over chunks sits
// INSIDE the thread's code: nothing is shared while it runs, so the kernel has
// no barrier in any loop. After the loop each thread writes its V partials to
// workgroup memory; then every thread folds its vector to a scalar, a
// subgroup combines its lanes with `gpu.shuffle xor`, lane 0 of every
// subgroup writes its value to workgroup memory, and after a barrier one
// subgroup shuffles those values into the row's result. That is the only
// barrier (none with one subgroup per row): every other access to workgroup
// memory is a thread reading back its own partials.
//
// Several rows per workgroup: when a row takes one subgroup (T = subgroup
// size), R rows share a workgroup [T, R, 1] (XLA does likewise for short
// rows): the innermost parallel dim is tiled by R onto the grid, each thread
// forall gets R threads along y (one row each) before its T along x, and the
// combine forall gives each row its own thread y, guarded by
// `thread_id.x < 1`, so that step 10 makes one T-lane warp op per row. One
// subgroup per workgroup would cap occupancy (32 one-warp blocks per SM on
// CUDA: 50%) and make thousands of tiny workgroups.
//
// Rows that T*V does not divide ("ragged"): the first C*T*V elements go as
// above and the r < T*V left over (the tail) into a second T*V accumulator,
// thread t taking the V elements at t*V of the tail (ceil(r / V) threads, the
// last one's vector masked). The combine reduces both accumulators in the
// same guarded region. No padded copy of the input is ever made.
//
// The values below are the defaults for a 2-D root [rows, 1000] on lavapipe
// (subgroup 8, T = 8, V = 4). The tilefuse driver clones this sequence per
// dispatch and sets every attribute that carries a `tilefuse.param` tag from
// python/tilefuse/strategies/row_reduction.py. The parameters:
//   root_inputs        positions of the root's inputs (its producers are fused)
//   root_init          position of the root's init operand (the fill of the result)
//   workgroup_tile     rows per workgroup: 1 for every parallel dim but R
//                      for the innermost
//   combine_threads    one thread y per row for the combine (R, or 1)
//   full_length        C*T*V: where the tail starts (the row length if T*V divides it)
//   chunk              T*V: the elements of one chunk
//   chunk_threads      T threads along a chunk's T*V columns
//   chunk_step         one chunk per loop iteration (reduction dim C tiled by 1)
//   tail_tile          V: one vector per thread in the tail
//   thread_count       T threads, for the tail accumulator's fill
//   vector_sizes       the V-wide vector of a thread (1 for parallel dims)
//   warp_size          T: the combine is distributed over all T threads
//   workgroup_dims     workgroup size [T, R, 1] and the target's subgroup size
// (chunk_threads, tail_tile and thread_count also get their thread mapping:
// [x] for one row per workgroup, [y, x] for R rows.)
//   translation_info   the final pipeline annotation
// Steps 3-7 differ by the row's layout (divisible, ragged, short): each is
// a `transform.include` carrying a `tilefuse.step` name, pointing at one of
// the named sequences below the main one, which row_reduction.steps picks.
module attributes {transform.with_named_sequence} {
  // Shared steps (transform_scripts/common.mlir), declared here, defined once
  // in the library the driver writes.
  transform.named_sequence private @tilefuse_find_root(%dispatch: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op)
  transform.named_sequence private @tilefuse_skip(%handle: !transform.any_op {transform.readonly})

  transform.named_sequence @tilefuse_row_reduction(%dispatch: !transform.any_op {transform.readonly}) {
    // Step 1. Find the root (the op whose result the dispatch stores: a
    // shared step, transform_scripts/common.mlir), the producers of its
    // inputs and the fill that initializes its result.
    %func, %root = transform.include @tilefuse_find_root failures(propagate) (%dispatch)
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %operands = transform.get_operand %root[0] {tilefuse.param = "root_inputs"}
      : (!transform.any_op) -> !transform.any_value
    %producers = transform.get_defining_op %operands
      : (!transform.any_value) -> !transform.any_op
    %init = transform.get_producer_of_operand %root[1] {tilefuse.param = "root_init"}
      : (!transform.any_op) -> !transform.any_op

    // Step 2. One row per workgroup: tile the parallel dims by 1 onto the
    // grid and pull the producers and the result's fill into the tile, so the
    // workgroup computes them only for its own row. The row's producers are
    // tagged: steps 4 and 5 move them further in, next to the reads.
    %wg_root, %grid = transform.structured.tile_using_forall %root
        tile_sizes [1] (mapping = [#gpu.block<x>]) {tilefuse.param = "workgroup_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // The producers are fused as they come: a dispatch.tensor.load fused in
    // reads just the row (the kernel is the same as with the load left
    // outside and sliced). No filtering by `match ... in %producers`: that
    // takes one payload op, and a root with two inputs (sum(x * y)) failed.
    %row_producers, %grid_1 = transform.structured.fuse_into_containing_op %producers into %grid
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.structured.fuse_into_containing_op %init into %grid_1
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.iree.populate_workgroup_count_region_using_num_threads_slice %grid_1
      : (!transform.any_op) -> ()
    %row_tag = transform.param.constant "row" -> !transform.any_param
    transform.annotate %row_producers "tilefuse.producer" = %row_tag
      : !transform.any_op, !transform.any_param
    %wg_init = transform.get_producer_of_operand %wg_root[1] {tilefuse.param = "root_init"}
      : (!transform.any_op) -> !transform.any_op

    // Step 3. Split the row into its full chunks [0, C*T*V) and the tail
    // [C*T*V, N) (@row_reduction_split_row). The tail's reduction starts from
    // the chunks' result. When T*V divides the row the split point is N and
    // there is no tail; a row shorter than one chunk is all tail
    // (@row_reduction_all_tail).
    %wg_main, %wg_tail = transform.include @row_reduction_split_row failures(propagate) (%wg_root)
        {tilefuse.step = "split_row"} : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op

    // Step 4. The full chunks, each thread walking its own V columns of
    // every chunk (@row_reduction_chunks; none in a short row).
    %combine, %chunk_forall = transform.include @row_reduction_chunks failures(propagate)
        (%func, %grid_1, %wg_main) {tilefuse.step = "chunks"}
      : (!transform.any_op, !transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)

    // Step 5 (ragged rows only). The tail, in a T*V accumulator of its own
    // (@row_reduction_tail).
    %tail_combine, %tail_forall, %tail_thread_fill = transform.include @row_reduction_tail failures(propagate)
        (%func, %grid_1, %wg_tail) {tilefuse.step = "tail"}
      : (!transform.any_op, !transform.any_op, !transform.any_op)
        -> (!transform.any_op, !transform.any_op, !transform.any_op)

    // Step 6. The combine (and the fill of the result) go into a forall of
    // one thread along y. Mapping it adds the guard `thread_id.x < 1`, the
    // form that step 10 turns into a distributed, all-threads reduction. With
    // a tail, the last combine is the tail's, and the chunks' combine (its
    // init) joins it in the same forall (@row_reduction_combine_tail);
    // without, the chunks' combine is the last (@row_reduction_combine_chunks).
    transform.include @row_reduction_combine_tail failures(propagate) (%combine, %tail_combine, %wg_init)
        {tilefuse.step = "combine"} : (!transform.any_op, !transform.any_op, !transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // Step 7. Vectorize: each thread's chunk ops to one V-wide vector, the
    // tail's to one V-wide vector (the last one masked, reading only
    // in-bounds elements), the combine to T*V-wide vector.multi_reductions.
    transform.include @row_reduction_vectorize_chunks failures(propagate) (%chunk_forall)
        {tilefuse.step = "vectorize_chunks"} : (!transform.any_op) -> ()
    transform.include @row_reduction_vectorize_tail failures(propagate) (%tail_forall, %tail_thread_fill)
        {tilefuse.step = "vectorize_tail"} : (!transform.any_op, !transform.any_op) -> ()
    %combine_foralls = transform.structured.match attributes{tilefuse.combine} in %func
      : (!transform.any_op) -> !transform.any_op
    %combine_ops = transform.structured.match interface{LinalgOp} in %combine_foralls
      : (!transform.any_op) -> !transform.any_op
    transform.structured.vectorize %combine_ops : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.vector.lower_masked_transfers
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // Step 8. Bufferize. The accumulators become T*V buffers in workgroup
    // memory; the inputs are read in place from their bindings (the
    // [C, T*V] view is a memref.expand_shape, no copy). Canonicalize, CSE,
    // canonicalize: bufferization leaves self-copies that would stop the
    // distribution in step 10.
    transform.iree.eliminate_empty_tensors %func : (!transform.any_op) -> ()
    %bufferized = transform.iree.bufferize <{target_gpu}> %func
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %bufferized : !transform.any_op
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.canonicalization
    } : !transform.any_op

    // Step 9. Map the grid forall to workgroups and the thread foralls to
    // thread ids, without a barrier after each thread forall: no thread ever
    // reads what another thread wrote. Thread t fills, accumulates (chunks
    // and tail) and, once step 10 has distributed the combine, reads back
    // only the V columns at t*V of its own row's accumulators; the one
    // exchange between subgroups (T > subgroup size) is IREE's group
    // reduction, which brings its own barrier; lane 0 writes the row's
    // result to global memory. Barriers cost a coroutine switch per subgroup
    // on lavapipe (measured in docs/findings.md, 'What a kernel costs on
    // lavapipe'). The verifier rejects a kernel whose combine was not
    // distributed (it would read other threads' partials). The subgroup size must be the target's
    // (lavapipe 8): the distribution in step 10 reads it to size its shuffles.
    transform.iree.forall_to_workgroup %bufferized : (!transform.any_op) -> ()
    transform.iree.map_nested_forall_to_gpu_threads %bufferized
        workgroup_dims = [8, 1, 1] subgroup_size = 8 sync_after_distribution = false
        {tilefuse.param = "workgroup_dims"} : (!transform.any_op) -> ()
    // Keep each thread's running partial in registers across the chunk loop
    // (its accumulator slice is read and written at loop-invariant indices).
    %kernel = transform.structured.hoist_redundant_vector_transfers %bufferized
      : (!transform.any_op) -> !transform.any_op

    // Step 10. Distribute the combine over all T threads: the guarded region
    // becomes a T-lane warp op, each T*V vector splits into one V-vector per
    // lane (exactly the slice the lane accumulated), and the reductions
    // across lanes become subgroup shuffles, then (T > subgroup) workgroup
    // memory and a barrier between subgroups, then shuffles again.
    %reduction = transform.structured.match ops{["vector.multi_reduction"]} in %kernel
      : (!transform.any_op) -> !transform.any_op
    %guard = transform.get_parent_op %reduction <{deduplicate, op_name = "scf.if"}>
      : (!transform.any_op) -> !transform.any_op
    %warp = transform.iree.vector.to_warp_execute_on_lane_0 %guard <{warp_size = 8}>
        {tilefuse.param = "warp_size"} : (!transform.any_op) -> !transform.any_op
    transform.iree.vector.warp_distribute %kernel : (!transform.any_op) -> ()

    // Step 11. Lower what is left of the vector dialect to what the SPIR-V
    // and NVVM back ends take: 1-D transfers, masks as selects.
    transform.apply_patterns to %kernel {
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.vector.lower_masks
      transform.apply_patterns.vector.lower_masked_transfers
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %kernel : !transform.any_op
    // Indices as affine.apply, not affine.linearize_index: the [C, T*V] view
    // of step 4 leaves `linearize_index [c, t*V] by (C, T*V)` as a load's
    // column. IREE's SPIR-V lowering reads the buffer as vec4s and divides
    // that column by 4 with an affine floordiv, which folds through an
    // affine.apply (to c*T + t) but not through linearize_index: the kernel
    // then did a udiv per lane and load (measured in docs/findings.md, 'A
    // udiv per load').
    %kernel_1 = transform.apply_registered_pass "affine-expand-index-ops-as-affine" to %kernel
      : (!transform.any_op) -> !transform.any_op

    // Step 12. Tell IREE the kernel is finished and for which workgroup
    // size, then print it: the driver reads the printout to check that the
    // strategy really ran (python/tilefuse/verify.py).
    %done = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.no_pipeline workgroup_size = [8, 1, 1]
        subgroup_size = 8> {tilefuse.param = "translation_info"} -> !transform.any_param
    transform.annotate %kernel_1 "translation_info" = %done
      : !transform.any_op, !transform.any_param
    transform.print %kernel_1 : !transform.any_op
    transform.yield
  }

  // The optional steps. For each `tilefuse.step` include above, the strategy
  // (row_reduction.steps) picks one of these, by the row's layout:
  //   divisible (T*V divides N)  split_row, chunks, no_tail, combine_chunks,
  //                              vectorize_chunks, @tilefuse_skip for the tail
  //   ragged                     split_row, chunks, tail, combine_tail,
  //                              vectorize_chunks, vectorize_tail
  //   short (N < T*V)            all_tail, no_chunks, tail, combine_tail,
  //                              @tilefuse_skip for the chunks, vectorize_tail

  // Step 3: the full chunks [0, F) and the tail [F, N) (empty when F = N).
  transform.named_sequence @row_reduction_split_row(%wg_root: !transform.any_op {transform.consumed})
      -> (!transform.any_op, !transform.any_op) {
    %parts = "transform.structured.split"(%wg_root) <{dimension = 1 : i64, static_chunk_sizes = 992 : i64}>
        {tilefuse.param = "full_length"} : (!transform.any_op) -> !transform.any_op
    %wg_main, %wg_tail = "transform.split_handle"(%parts) <{fail_on_payload_too_small = false}>
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield %wg_main, %wg_tail : !transform.any_op, !transform.any_op
  }

  // Step 3, a row shorter than one chunk: it is all tail.
  transform.named_sequence @row_reduction_all_tail(%wg_root: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op) {
    transform.yield %wg_root, %wg_root : !transform.any_op, !transform.any_op
  }

  // Step 4: the full chunks. Split the reduction: view the row as [C, T*V]
  // (an expand_shape of the input, no copy), giving
  //   %partial_fill  a T*V-wide accumulator set to the reduction's identity,
  //   %chunked       the reduction over C into the accumulator (parallel
  //                  over its T*V columns),
  //   %combine       the reduction of the accumulator to the row's result.
  // Thread t takes the V columns at t*V (num_threads keeps exactly T
  // threads) and, inside its own code, loops over the C chunks one at a
  // time. The accumulator's fill goes into the thread forall too, so each
  // thread initializes only its own slice (a thread zeroing the whole
  // buffer races with the others). The producers move into the chunk loop
  // (after the expand_shape is bubbled above the thread's slice), so each
  // thread loads and converts only its own vector of each chunk. Yields the
  // combine and the thread forall (vectorized in step 7).
  transform.named_sequence @row_reduction_chunks(%func: !transform.any_op {transform.readonly},
      %grid_1: !transform.any_op {transform.readonly}, %wg_main: !transform.any_op {transform.consumed})
      -> (!transform.any_op, !transform.any_op) {
    %alloc, %partial_fill, %chunked, %combine = transform.structured.split_reduction %wg_main
        <{inner_parallel, insert_split_dimension = 1 : i64, split_factor = 32 : i64}>
        {tilefuse.param = "chunk"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    %thread_chunked, %chunk_forall = transform.structured.tile_using_forall %chunked
        num_threads [0, 0, 8] (mapping = [#gpu.thread<x>]) {tilefuse.param = "chunk_threads"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.structured.fuse_into_containing_op %partial_fill into %chunk_forall
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %step, %chunk_loop = transform.structured.tile_using_for %thread_chunked
        tile_sizes [0, 1, 0] {tilefuse.param = "chunk_step"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.apply_patterns to %func {
      transform.apply_patterns.tensor.bubble_up_extract_slice
      transform.apply_patterns.tensor.merge_consecutive_insert_extract_slice
    } : !transform.any_op
    %chunk_producers = transform.structured.match attributes{tilefuse.producer = "row"} in %grid_1
      : (!transform.any_op) -> !transform.any_op
    %fused_chunk_producers, %chunk_loop_1 = transform.structured.fuse_into_containing_op %chunk_producers into %chunk_loop
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    // The clones in the loop inherit the "row" tag: retag them, so that step
    // 5 finds only the row's producers (which the tail still reads).
    %chunk_tag = transform.param.constant "chunk" -> !transform.any_param
    transform.annotate %fused_chunk_producers "tilefuse.producer" = %chunk_tag
      : !transform.any_op, !transform.any_param
    transform.yield %combine, %chunk_forall : !transform.any_op, !transform.any_op
  }

  // Step 4, a short row: no chunks. The handles it yields are only passed to
  // steps that ignore them; the function's, since the row's own handle is
  // consumed by the tail's steps.
  transform.named_sequence @row_reduction_no_chunks(%func: !transform.any_op {transform.readonly},
      %grid_1: !transform.any_op {transform.readonly}, %wg_main: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op) {
    transform.yield %func, %func : !transform.any_op, !transform.any_op
  }

  // Step 5: the tail. A T*V accumulator of its own whose first r columns get
  // the tail's elements, V per thread: thread t touches the same columns t*V
  // as in the chunks. Only ceil(r / V) threads take part and the last one's
  // vector is masked. The fill is split over all T threads, each writing its
  // own slice. Yields the tail's combine, its thread forall and the threads'
  // fills (vectorized in step 7).
  transform.named_sequence @row_reduction_tail(%func: !transform.any_op {transform.readonly},
      %grid_1: !transform.any_op {transform.readonly}, %wg_tail: !transform.any_op {transform.consumed})
      -> (!transform.any_op, !transform.any_op, !transform.any_op) {
    %tail_fill, %tail_partial, %tail_combine, %tail_loop = transform.structured.tile_reduction_using_for %wg_tail
        by tile_sizes = [0, 32] {tilefuse.param = "tail_chunk"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    %tail_thread, %tail_forall = transform.structured.tile_using_forall %tail_partial
        tile_sizes [0, 4] (mapping = [#gpu.thread<x>]) {tilefuse.param = "tail_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.apply_patterns to %func {
      transform.apply_patterns.tensor.merge_consecutive_insert_extract_slice
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    %tail_producers = transform.structured.match attributes{tilefuse.producer = "row"} in %grid_1
      : (!transform.any_op) -> !transform.any_op
    transform.structured.fuse_into_containing_op %tail_producers into %tail_forall
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %tail_thread_fill, %tail_fill_forall = transform.structured.tile_using_forall %tail_fill
        num_threads [0, 8] (mapping = [#gpu.thread<x>]) {tilefuse.param = "thread_count"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield %tail_combine, %tail_forall, %tail_thread_fill
      : !transform.any_op, !transform.any_op, !transform.any_op
  }

  // Step 5, rows that T*V divides: no tail (the handles it yields are only
  // passed to steps that ignore them).
  transform.named_sequence @row_reduction_no_tail(%func: !transform.any_op {transform.readonly},
      %grid_1: !transform.any_op {transform.readonly}, %wg_tail: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op, !transform.any_op) {
    transform.yield %func, %func, %func : !transform.any_op, !transform.any_op, !transform.any_op
  }

  // Step 6 with a tail: the tail's combine, with its init (the chunks'
  // combine, or the result's fill for a short row) and the result's fill.
  transform.named_sequence @row_reduction_combine_tail(%combine: !transform.any_op {transform.readonly},
      %tail_combine: !transform.any_op {transform.consumed}, %wg_init: !transform.any_op {transform.consumed}) {
    %last_init = transform.get_producer_of_operand %tail_combine[1]
      : (!transform.any_op) -> !transform.any_op
    %thread_combine, %combine_forall = transform.structured.tile_using_forall %tail_combine
        num_threads [1] (mapping = [#gpu.thread<y>]) {tilefuse.param = "combine_threads"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %combine_inits = transform.merge_handles deduplicate %last_init, %wg_init : !transform.any_op
    %fused_inits, %combine_forall_1 = transform.structured.fuse_into_containing_op %combine_inits into %combine_forall
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.annotate %combine_forall_1 "tilefuse.combine" : !transform.any_op
    transform.yield
  }

  // Step 6 without a tail: the chunks' combine and the result's fill.
  transform.named_sequence @row_reduction_combine_chunks(%combine: !transform.any_op {transform.consumed},
      %tail_combine: !transform.any_op {transform.readonly}, %wg_init: !transform.any_op {transform.consumed}) {
    %thread_combine_d, %combine_forall_d = transform.structured.tile_using_forall %combine
        num_threads [1] (mapping = [#gpu.thread<y>]) {tilefuse.param = "combine_threads"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %fused_init_d, %combine_forall_d1 = transform.structured.fuse_into_containing_op %wg_init into %combine_forall_d
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.annotate %combine_forall_d1 "tilefuse.combine" : !transform.any_op
    transform.yield
  }

  // Step 7: each thread's chunk ops to one V-wide vector.
  transform.named_sequence @row_reduction_vectorize_chunks(%chunk_forall: !transform.any_op {transform.readonly}) {
    %chunk_ops = transform.structured.match interface{LinalgOp} in %chunk_forall
      : (!transform.any_op) -> !transform.any_op
    transform.structured.vectorize %chunk_ops : !transform.any_op
    transform.yield
  }

  // Step 7: the tail's ops and fills to one V-wide vector per thread, the
  // last one masked.
  transform.named_sequence @row_reduction_vectorize_tail(%tail_forall: !transform.any_op {transform.readonly},
      %tail_thread_fill: !transform.any_op {transform.consumed}) {
    %tail_ops = transform.structured.match interface{LinalgOp} in %tail_forall
      : (!transform.any_op) -> !transform.any_op
    transform.structured.vectorize %tail_ops vector_sizes [1, 4]
        {tilefuse.param = "vector_sizes"} : !transform.any_op
    transform.structured.vectorize %tail_thread_fill vector_sizes [1, 4]
        {tilefuse.param = "vector_sizes"} : !transform.any_op
    transform.yield
  }

  // Step 7 without a tail.
  transform.named_sequence @row_reduction_no_tail_vectors(%tail_forall: !transform.any_op {transform.readonly},
      %tail_thread_fill: !transform.any_op {transform.readonly}) {
    transform.yield
  }
}
