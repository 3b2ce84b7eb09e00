// The "row_reduction" kernel: XLA's row-reduction emitter as a
// transform-dialect strategy.
//
// Applies to a dispatch whose root linalg.generic reduces its innermost
// dimension (a row), with elementwise producers (converts, exp, ...) fused in.
// One workgroup reduces one row (the parallel dims go to the grid). Its T
// threads walk the row in chunks of T*V elements: in every chunk thread t
// loads the V-element vector at t*V, so a subgroup reads one contiguous run of
// memory (coalesced, 128-bit loads) and each thread keeps a V-wide running
// partial in registers. At the end every thread folds its vector to a scalar,
// a subgroup combines its lanes with `gpu.shuffle xor`, lane 0 of every
// subgroup writes its value to workgroup memory, and after a barrier one
// subgroup shuffles those values into the row's result.
//
// Rows that are not a multiple of T*V: the last, partial chunk is peeled off
// the loop and handled by ceil(rest / V) threads, the last of which reads a
// masked vector. No padded copy of the input is ever made.
//
// The values below are the defaults for a 2-D root [rows, N] on lavapipe
// (subgroup 8). The tilefuse driver clones this sequence per dispatch and sets
// every attribute that carries a `tilefuse.param` tag from
// python/tilefuse/strategies/row_reduction.py. The parameters:
//   root_inputs        positions of the root's inputs (its producers are fused)
//   root_init          position of the root's init operand (the fill of the result)
//   workgroup_tile     one row per workgroup: 1 for every parallel dim
//   chunk              T*V: the elements a workgroup reads per loop iteration
//   thread_count       T threads along the chunk (V elements each)
//   vector_sizes       the V-wide vector of a thread (1 for parallel dims)
//   tail_tile          V: the peeled last chunk, one vector per thread
// Ops marked `tilefuse.ragged_tail` handle the peeled last chunk; the driver
// deletes them when T*V divides the row (there is nothing to peel then).
//   warp_size          T: the combine is distributed over all T threads
//   workgroup_dims     workgroup size [T, 1, 1] and the target's subgroup size
//   translation_info   the final pipeline annotation
module attributes {transform.with_named_sequence} {
  transform.named_sequence @tilefuse_row_reduction(%dispatch: !transform.any_op {transform.readonly}) {
    // Step 1. Find the root (the op whose result the dispatch stores), the
    // producers of its inputs and the fill that initializes its result.
    // On SPIR-V IREE hands the strategy the dispatch's module, on CUDA the
    // function, where results leave through iree_codegen.store_to_buffer.
    %stores = transform.structured.match ops{["iree_tensor_ext.dispatch.tensor.store", "iree_codegen.store_to_buffer"]} in %dispatch
      : (!transform.any_op) -> !transform.any_op
    %func = transform.get_parent_op %stores <{deduplicate, op_name = "func.func"}>
      : (!transform.any_op) -> !transform.any_op
    %root = transform.get_producer_of_operand %stores[0]
      : (!transform.any_op) -> !transform.any_op
    %operands = transform.get_operand %root[0] {tilefuse.param = "root_inputs"}
      : (!transform.any_op) -> !transform.any_value
    %producers = transform.get_defining_op %operands
      : (!transform.any_value) -> !transform.any_op
    %init = transform.get_producer_of_operand %root[1] {tilefuse.param = "root_init"}
      : (!transform.any_op) -> !transform.any_op

    // Step 2. One row per workgroup: tile the parallel dims by 1 onto the
    // grid and pull the producers and the result's fill into the tile, so the
    // workgroup computes them only for its own row.
    %wg_root, %grid = transform.structured.tile_using_forall %root
        tile_sizes [1] (mapping = [#gpu.block<x>]) {tilefuse.param = "workgroup_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.structured.fuse_into_containing_op %producers into %grid
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.structured.fuse_into_containing_op %init into %grid
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.iree.populate_workgroup_count_region_using_num_threads_slice %grid
      : (!transform.any_op) -> ()

    // Step 3. Split the row into chunks of T*V. This gives
    //   %partial_fill  a T*V-wide accumulator set to the reduction's identity,
    //   %partial       a loop over the chunks adding each chunk into the
    //                  accumulator elementwise (no reduction left in it),
    //   %combine       the reduction of the accumulator to the row's result.
    // The producers go into the loop so every chunk is computed where it is
    // read. The partial op is tagged so it can be found again after peeling.
    %wg_operands = transform.get_operand %wg_root[0] {tilefuse.param = "root_inputs"}
      : (!transform.any_op) -> !transform.any_value
    %wg_producers = transform.get_defining_op %wg_operands
      : (!transform.any_value) -> !transform.any_op
    %wg_init = transform.get_producer_of_operand %wg_root[1] {tilefuse.param = "root_init"}
      : (!transform.any_op) -> !transform.any_op
    %partial_fill, %partial, %combine, %chunks = transform.structured.tile_reduction_using_for %wg_root
        by tile_sizes = [0, 256] {tilefuse.param = "chunk"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    transform.structured.fuse_into_containing_op %wg_producers into %chunks
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.annotate %partial "tilefuse.partial" : !transform.any_op

    // Step 4 (ragged rows only). Peel the last, partial chunk off the loop:
    // the main loop then only sees full chunks (static sizes, full vectors)
    // and the rest is one static, smaller chunk.
    %chunk_loop = transform.cast %chunks : !transform.any_op to !transform.op<"scf.for">
    %main_loop, %tail_loop = transform.loop.peel %chunk_loop {tilefuse.ragged_tail}
      : (!transform.op<"scf.for">) -> (!transform.any_op, !transform.any_op)
    // The main chunk's partial op comes first in the IR, the peeled one (if
    // any) second.
    %partials = transform.structured.match attributes{"tilefuse.partial"} in %grid
      : (!transform.any_op) -> !transform.any_op
    %main, %tail = "transform.split_handle"(%partials) <{fail_on_payload_too_small = false}>
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)

    // Step 5. Threads. In a full chunk, thread t takes the V elements at t*V
    // (num_threads keeps exactly T threads); its producers come along, so
    // each thread loads and converts only its own vector. The accumulator's
    // fill is split the same way, so each thread initializes only the slice
    // it will use (a thread zeroing the whole buffer races with the others).
    %main_operands = transform.get_operand %main[0] {tilefuse.param = "root_inputs"}
      : (!transform.any_op) -> !transform.any_value
    %main_producers = transform.get_defining_op %main_operands
      : (!transform.any_value) -> !transform.any_op
    %thread_partial, %thread_forall = transform.structured.tile_using_forall %main
        num_threads [0, 64] (mapping = [#gpu.thread<x>]) {tilefuse.param = "thread_count"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.structured.fuse_into_containing_op %main_producers into %thread_forall
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %thread_fill, %fill_forall = transform.structured.tile_using_forall %partial_fill
        num_threads [0, 64] (mapping = [#gpu.thread<x>]) {tilefuse.param = "thread_count"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)

    // Step 5b (ragged rows only). The peeled chunk: V elements per thread
    // again, so thread t touches the same accumulator slice as in the loop;
    // only ceil(rest / V) threads take part and the last one's vector is
    // masked.
    %tail_operands = transform.get_operand %tail[0] {tilefuse.param = "root_inputs", tilefuse.ragged_tail}
      : (!transform.any_op) -> !transform.any_value
    %tail_producers = transform.get_defining_op %tail_operands {tilefuse.ragged_tail}
      : (!transform.any_value) -> !transform.any_op
    %tail_partial, %tail_forall = transform.structured.tile_using_forall %tail
        tile_sizes [0, 4] (mapping = [#gpu.thread<x>]) {tilefuse.param = "tail_tile", tilefuse.ragged_tail}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.structured.fuse_into_containing_op %tail_producers into %tail_forall {tilefuse.ragged_tail}
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)

    // Step 6. The combine (and the fill of the result) go into a forall of
    // one thread along y. Mapping it adds the guard `thread_id.x < 1`, the
    // form that step 10 turns into a distributed, all-threads reduction.
    %thread_combine, %combine_forall = transform.structured.tile_using_forall %combine
        num_threads [1] (mapping = [#gpu.thread<y>])
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.structured.fuse_into_containing_op %wg_init into %combine_forall
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // Step 7. Vectorize: each thread's ops to one V-wide vector (the masked
    // last vector of a ragged row reads only in-bounds elements), the combine
    // to one T*V-wide vector.multi_reduction.
    transform.structured.vectorize %thread_partial vector_sizes [1, 4]
        {tilefuse.param = "vector_sizes"} : !transform.any_op
    transform.structured.vectorize %thread_fill vector_sizes [1, 4]
        {tilefuse.param = "vector_sizes"} : !transform.any_op
    transform.structured.vectorize %tail_partial vector_sizes [1, 4]
        {tilefuse.param = "vector_sizes", tilefuse.ragged_tail} : !transform.any_op
    %combine_ops = transform.structured.match interface{LinalgOp} in %combine_forall
      : (!transform.any_op) -> !transform.any_op
    transform.structured.vectorize %combine_ops : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.vector.lower_masked_transfers
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // Step 8. Bufferize. The accumulator becomes a T*V buffer in workgroup
    // memory; the inputs are read in place from their bindings (no copy).
    // Canonicalize, CSE, canonicalize: bufferization leaves self-copies that
    // would stop the distribution in step 10.
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
    // thread ids. The subgroup size must be the target's (lavapipe 8): the
    // distribution in step 10 reads it to size its shuffles.
    transform.iree.forall_to_workgroup %bufferized : (!transform.any_op) -> ()
    transform.iree.map_nested_forall_to_gpu_threads %bufferized
        workgroup_dims = [64, 1, 1] subgroup_size = 8
        {tilefuse.param = "workgroup_dims"} : (!transform.any_op) -> ()
    // Keep each thread's running partial in registers across the chunk loop
    // (the accumulator slice is read and written at loop-invariant indices),
    // then drop the barriers that no longer guard any shared access.
    %kernel = transform.structured.hoist_redundant_vector_transfers %bufferized
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %kernel {
      transform.apply_patterns.gpu.eliminate_barriers
    } : !transform.any_op

    // Step 10. Distribute the combine over all T threads: the guarded region
    // becomes a T-lane warp op, its T*V vector splits into one V-vector per
    // lane (exactly the slice the lane accumulated), and the reduction across
    // lanes becomes subgroup shuffles, then workgroup memory and a barrier
    // between subgroups, then shuffles again.
    %reduction = transform.structured.match ops{["vector.multi_reduction"]} in %kernel
      : (!transform.any_op) -> !transform.any_op
    %guard = transform.get_parent_op %reduction <{op_name = "scf.if"}>
      : (!transform.any_op) -> !transform.any_op
    %warp = transform.iree.vector.to_warp_execute_on_lane_0 %guard <{warp_size = 64}>
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

    // Step 12. Tell IREE the kernel is finished and for which workgroup
    // size, then print it: the driver reads the printout to check that the
    // strategy really ran (python/tilefuse/verify.py).
    %done = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.no_pipeline workgroup_size = [64, 1, 1]
        subgroup_size = 8> {tilefuse.param = "translation_info"} -> !transform.any_param
    transform.annotate %kernel "translation_info" = %done
      : !transform.any_op, !transform.any_param
    transform.print %kernel : !transform.any_op
    transform.yield
  }
}
