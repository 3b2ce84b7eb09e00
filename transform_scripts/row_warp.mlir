// The "row_warp" kernel: ONE SUBGROUP owns a row of a row reduction or of a
// row normalization (softmax, layernorm, RMSNorm), with no loop-carried
// state in memory. XLA's reduction and softmax emitters do the same for
// rows that fit.
//
// Applies to rank-2 dispatches over [rows, N] whose N the subgroup's T lanes
// divide (python/tilefuse/strategies/row_warp.py): a lone row reduction
// with elementwise producers, or row reductions and elementwise ops with an
// elementwise root (the "softmax" kernel's dispatches). The row is written at
// the workgroup level as vector ops on chunks of T*V elements and then
// distributed over the subgroup's T lanes by IREE's warp distribution: lane t
// takes the V elements at t*V of every chunk (a subgroup reads one contiguous
// run per chunk: coalesced 128-bit loads).
//   - A reduction folds its chunks elementwise into a T*V accumulator (each
//     lane its own V, in registers), then reduces it across the lanes with
//     shuffles. The butterfly leaves the result in every lane: no workgroup
//     memory, no barrier, no broadcast.
//   - With an elementwise root the chunk loops are unrolled completely, so
//     every read of the row is the same vector op on the same tensor slice
//     and CSE merges them: the row is read from memory once and stays in
//     registers for every reduction and for the root, which computes its
//     chunks there and stores each once. (A lone reduction reads each
//     element once anyway; its chunk loop stays a loop, so any row length
//     fits.)
// So the kernel has no barrier and no workgroup memory, and a normalization
// no loop either. On lavapipe that matters: a loop runs under an execution
// mask kept in memory, every barrier switches coroutines, and a load after a
// store waits for it (the chunked softmax kernel interleaved them in its
// root loop). Measured against the chunked "softmax" kernel in
// docs/findings.md, 'What a kernel costs on lavapipe'.
//
// Rows that T*V does not divide: the row is split at F = C*T*V; the last
// r = N - F elements (r is a multiple of T since T divides N) are the tail,
// one vector of r/T elements per lane, reduced and combined after the
// chunks (a second butterfly) and stored by its own lane. No masks. (On
// SPIR-V the driver then moves those narrow accesses onto an alias of their
// binding, python/tilefuse/kernel/aliases.py.)
//
// R rows per workgroup [T, R, 1]: each row is a forall iteration on thread
// y, and the guard `thread_id.x < 1` that mapping puts around it becomes the
// T-lane warp op. On lavapipe subgroups are formed from x, so each row is one
// subgroup there too.
//
// A long row normalization on a GPU (row_warp.row_threads) takes T threads
// of several subgroups instead, R = 1, with the same steps: the warp op then
// has T lanes, and IREE's warp distribution ends each reduction's butterfly
// with one value per subgroup, written to workgroup memory, a barrier, and a
// butterfly over those values (T <= subgroup_size**2), in straight-line
// code: no barrier in a loop. 8192 f32 on CUDA: 512 threads, 4 chunks of
// 2048, each thread's 16 elements loaded once (4 128-bit loads).
//
// The values below are defaults for rows of 1000 f32 on lavapipe (T = 8,
// V = 4: 31 chunks of 32 and a tail of 8). The tilefuse driver clones this
// sequence per dispatch and sets every attribute that carries a
// `tilefuse.param` tag from python/tilefuse/strategies/row_warp.py:
//   row_tile          [R]: rows per workgroup
//   full_length       F: where the tail starts (ragged rows only)
//   reduction_chunk   [0, T*V]: a reduction's chunk (its accumulator's width)
//   root_chunk        [0, T*V]: the elementwise root's chunk
//   unroll            C: the chunks of a row, all unrolled
//   warp_size         T
//   workgroup_dims    workgroup size [T, R, 1] and the target's subgroup size
//   translation_info  the final pipeline annotation
// The steps some rows need and others do not are named sequences of their
// own, below the main one, reached by a `transform.include` that carries a
// `tilefuse.step` name: split_rows (ragged rows), chunk_root and peel_root
// (an elementwise root; peel_root for ragged rows), unroll_reductions and
// unroll_root (an elementwise root of more than one chunk). The driver points
// each include at the step or at a no-op from common.mlir (row_warp.steps)
// and copies the chosen steps with the main sequence; the include targets
// written here are the defaults' choice.
module attributes {transform.with_named_sequence} {
  // Shared steps (transform_scripts/common.mlir), declared here, defined once
  // in the library the driver writes.
  transform.named_sequence private @tilefuse_find_root(%dispatch: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op)
  transform.named_sequence private @tilefuse_pass(%handle: !transform.any_op {transform.readonly})
      -> !transform.any_op
  transform.named_sequence private @tilefuse_skip(%handle: !transform.any_op {transform.readonly})

  transform.named_sequence @tilefuse_row_warp(%dispatch: !transform.any_op {transform.readonly}) {
    // Step 1. Find the root, the op whose result the dispatch stores (a
    // shared step: transform_scripts/common.mlir).
    %func_0, %root = transform.include @tilefuse_find_root failures(propagate) (%dispatch)
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)

    // Step 2. R rows per workgroup: tile the root by R rows and fuse every
    // producer (transitively) into the workgroup's forall. IREE's workgroup
    // mapping wants the forall normalized (0 to rows/R step 1); the pass
    // invalidates every handle into the function, so the root is found
    // again by a tag.
    %wg_root_0, %grid_0 = transform.structured.fuse %root tile_sizes [1] apply_cleanup use_forall
        {tilefuse.param = "row_tile"} : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %blocks = transform.param.constant [#gpu.block<x>] -> !transform.any_param
    transform.annotate %grid_0 "mapping" = %blocks : !transform.any_op, !transform.any_param
    transform.annotate %wg_root_0 "tilefuse.wg_root" : !transform.any_op
    %func = transform.apply_registered_pass "iree-codegen-normalize-loop-bounds"
        with options = { "normalize-for" = false, "normalize-forall" = true } to %func_0
      : (!transform.any_op) -> !transform.any_op
    %grid = transform.structured.match ops{["scf.forall"]} in %func
      : (!transform.any_op) -> !transform.any_op
    %wg_root = transform.structured.match attributes{"tilefuse.wg_root"} in %func
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.tensor.fold_tensor_empty
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    transform.iree.populate_workgroup_count_region_using_num_threads_slice %grid
      : (!transform.any_op) -> ()

    // Step 3. One row per subgroup: tile the workgroup's rows by 1 into a
    // forall on thread y and fuse the row's ops into it again. Mapping it
    // (step 9) guards its body with `thread_id.x < 1`: the region step 10
    // hands to the subgroup. Then fuse each elementwise producer into the
    // ops that read it (softmax's exp(x - max) into its sum and into the
    // root): every op then reads the row itself, the same slices, which
    // CSE merges after unrolling.
    %row_root, %rows = transform.structured.fuse %wg_root tile_sizes [1] use_forall
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %thread_y = transform.param.constant [#gpu.thread<y>] -> !transform.any_param
    transform.annotate %rows "mapping" = %thread_y : !transform.any_op, !transform.any_param
    transform.apply_patterns to %func {
      transform.apply_patterns.tensor.fold_tensor_empty
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.iree.linalg_elementwise_greedy_fusion
    } : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op

    // Step 4 (ragged rows only). Split every reduction at F: the chunks
    // [0, F) and the tail [F, N), which starts from the chunks' result.
    %reductions = transform.structured.match ops{["linalg.generic"]}
        attributes{iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<reduction>]}
        in %rows : (!transform.any_op) -> !transform.any_op
    %root_ops = transform.structured.match ops{["linalg.generic"]}
        attributes{iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>]}
        in %rows : (!transform.any_op) -> !transform.any_op
    %main_reductions = transform.include @row_warp_split_rows failures(propagate) (%reductions)
        {tilefuse.step = "split_rows"} : (!transform.any_op) -> !transform.any_op

    // Step 5. Chunks. Each reduction's [0, F) part becomes a loop over its
    // C chunks folding T*V elements at a time into a T*V accumulator, then
    // the accumulator's combine. An elementwise root becomes a loop over
    // chunks too; its last, shorter chunk is peeled off (ragged rows).
    %fills, %partials, %combines, %reduction_loops = transform.structured.tile_reduction_using_for %main_reductions
        by tile_sizes = [0, 32] {tilefuse.param = "reduction_chunk"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    %root_loop = transform.include @row_warp_chunk_root failures(propagate) (%root_ops)
        {tilefuse.step = "chunk_root"} : (!transform.any_op) -> !transform.any_op
    %root_main = transform.include @row_warp_peel_root failures(propagate) (%root_loop)
        {tilefuse.step = "peel_root"} : (!transform.any_op) -> !transform.any_op

    // Step 6 (elementwise root). Unroll every chunk loop completely:
    // straight-line code, which CSE then shares between the phases (the
    // row's loads, and the producers' values both a reduction and the root
    // compute).
    transform.include @row_warp_unroll failures(propagate) (%reduction_loops)
        {tilefuse.step = "unroll_reductions"} : (!transform.any_op) -> ()
    transform.include @row_warp_unroll failures(propagate) (%root_main)
        {tilefuse.step = "unroll_root"} : (!transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // Step 7. Vectorize every op at its (static) size: chunks to T*V-wide
    // vectors, the tail to r-wide ones, combines to vector reductions. On
    // tensors, a read of an accumulator after its write folds away, so the
    // accumulators are SSA vectors, not buffers; CSE merges the repeated
    // reads and producers. No vector.contract: the warp distribution does
    // not take it apart (a tail sum(x * x) became one, run by lane 0).
    %vectorized = transform.structured.vectorize_children_and_apply_patterns %func
        <{disable_multi_reduction_to_contract_patterns}>
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %vectorized {
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %vectorized : !transform.any_op
    // A chunk loop left as a loop (a lone reduction's) reads and writes its
    // accumulator tensor at the same offsets every iteration: make that a
    // loop-carried vector, so that bufferization gives it no buffer (one
    // buffer for the workgroup's rows would be shared by all of them).
    %chunk_loops = transform.structured.match ops{["scf.for"]} in %vectorized
      : (!transform.any_op) -> !transform.any_op
    transform.foreach %chunk_loops : !transform.any_op {
    ^bb0(%loop: !transform.any_op):
      transform.loop.hoist_loop_invariant_subsets %loop : !transform.any_op
    }
    transform.apply_patterns to %vectorized {
      transform.apply_patterns.canonicalization
    } : !transform.any_op

    // Step 8. Bufferize: the row is read in place from its binding and the
    // root written to its binding; nothing else needs memory. Canonicalize,
    // CSE, canonicalize: bufferization leaves self-copies that would stop
    // the distribution in step 10.
    transform.iree.eliminate_empty_tensors %vectorized : (!transform.any_op) -> ()
    %bufferized = transform.iree.bufferize <{target_gpu}> %vectorized
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %bufferized : !transform.any_op
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.canonicalization
    } : !transform.any_op

    // Step 9. Map the row forall to workgroups and the rows to thread y:
    // each row's code runs under `thread_id.x < 1`. No barrier: no thread
    // reads what another wrote.
    transform.iree.forall_to_workgroup %bufferized : (!transform.any_op) -> ()
    transform.iree.map_nested_forall_to_gpu_threads %bufferized
        workgroup_dims = [8, 1, 1] subgroup_size = 8 sync_after_distribution = false
        {tilefuse.param = "workgroup_dims"} : (!transform.any_op) -> ()

    // Step 10. Hand each row to its subgroup: the guarded region becomes a
    // T-lane warp op; every T*V vector splits into the V elements of each
    // lane, the tail's r into r/T, and the reductions across lanes become
    // shuffle butterflies whose result every lane holds.
    %guards = transform.structured.match ops{["scf.if"]} in %bufferized
      : (!transform.any_op) -> !transform.any_op
    %warps = transform.iree.vector.to_warp_execute_on_lane_0 %guards <{warp_size = 8}>
        {tilefuse.param = "warp_size"} : (!transform.any_op) -> !transform.any_op
    transform.iree.vector.warp_distribute %bufferized : (!transform.any_op) -> ()

    // Step 11. Lower what is left of the vector dialect to what the SPIR-V
    // and NVVM back ends take.
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.vector.lower_masks
      transform.apply_patterns.vector.lower_masked_transfers
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %bufferized : !transform.any_op

    // Step 12. Tell IREE the kernel is finished and for which workgroup
    // size, then print it: the driver reads the printout to check that the
    // strategy really ran (python/tilefuse/verify.py).
    %done = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.no_pipeline workgroup_size = [8, 1, 1]
        subgroup_size = 8> {tilefuse.param = "translation_info"} -> !transform.any_param
    transform.annotate %bufferized "translation_info" = %done
      : !transform.any_op, !transform.any_param
    transform.print %bufferized : !transform.any_op
    transform.yield
  }

  // The optional steps. The strategy (row_warp.steps) picks, for each
  // `tilefuse.step` include above, one of these or a shared no-op
  // (@tilefuse_pass / @tilefuse_skip in common.mlir).

  // Step 4, ragged rows: split every reduction at F into the chunks [0, F)
  // and the tail [F, N); the chunks go on to step 5. (Rows that T*V divides:
  // @tilefuse_pass, the reductions go on whole.)
  transform.named_sequence @row_warp_split_rows(%reductions: !transform.any_op {transform.consumed})
      -> !transform.any_op {
    %main_reductions, %tail_reductions = transform.foreach %reductions
        : !transform.any_op -> !transform.any_op, !transform.any_op {
    ^bb0(%reduction: !transform.any_op):
      %parts = "transform.structured.split"(%reduction) <{dimension = 1 : i64, static_chunk_sizes = 992 : i64}>
          {tilefuse.param = "full_length"} : (!transform.any_op) -> !transform.any_op
      %main, %tail = "transform.split_handle"(%parts)
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
      transform.yield %main, %tail : !transform.any_op, !transform.any_op
    }
    transform.yield %main_reductions : !transform.any_op
  }

  // Step 5, elementwise root: the root becomes a loop over chunks of T*V.
  // (A lone reduction: @tilefuse_pass; the root is the reduction.)
  transform.named_sequence @row_warp_chunk_root(%root_ops: !transform.any_op {transform.consumed})
      -> !transform.any_op {
    %root_chunks, %root_loop = transform.structured.tile_using_for %root_ops
        tile_sizes [0, 32] {tilefuse.param = "root_chunk"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield %root_loop : !transform.any_op
  }

  // Step 5, elementwise root of a ragged row: peel the root's last, shorter
  // chunk off its loop; the full chunks' loop goes on to step 6.
  transform.named_sequence @row_warp_peel_root(%root_loop: !transform.any_op {transform.consumed})
      -> !transform.any_op {
    %root_for = transform.cast %root_loop : !transform.any_op to !transform.op<"scf.for">
    %root_main, %root_tail = transform.loop.peel %root_for
      : (!transform.op<"scf.for">) -> (!transform.any_op, !transform.any_op)
    transform.yield %root_main : !transform.any_op
  }

  // Step 6, elementwise root of more than one chunk: unroll the loops
  // completely (C iterations).
  transform.named_sequence @row_warp_unroll(%loops: !transform.any_op {transform.consumed}) {
    transform.foreach %loops : !transform.any_op {
    ^bb0(%loop: !transform.any_op):
      transform.loop.unroll %loop factor = 31 {tilefuse.param = "unroll"} : !transform.any_op
    }
    transform.yield
  }
}
