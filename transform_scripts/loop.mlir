// The "loop" kernel: XLA's loop emitter as a transform-dialect strategy.
//
// Applies to a dispatch whose root is an all-parallel structured op
// (elementwise chains, broadcasts, transposes, converts, iota, select, ...),
// gathers by tensor.extract in its body included (embedding lookups, RoPE's
// rotate-half, reverse).
// Every thread writes one short vector of the innermost dimension, so
// neighbouring threads touch neighbouring vectors: loads and stores coalesce.
//
// The values below are the library defaults for a rank-2 root. The tilefuse
// driver clones this sequence per dispatch and replaces every attribute that
// carries a `tilefuse.param` tag with the value its chooser computed from the
// shapes and the target (see python/tilefuse/strategies/loop.py). The names of
// the parameters:
//   root_inputs        positions of the root's inputs, in step "producers" (never its init: a
//                      tensor.empty init cannot be fused into the forall)
//   workgroup_tile     tile sizes of the root per workgroup (0 = whole dim)
//   workgroup_mapping  which tiled dim goes to block x / y / z
//   thread_count       threads per tiled dim inside a workgroup
//   thread_mapping     which of those dims goes to thread x / y
//   vector_sizes       the vector each thread loads and stores
//   workgroup_dims     the workgroup size [x, y, z]
//   translation_info   the final pipeline annotation (workgroup and subgroup size)
module attributes {transform.with_named_sequence} {
  // Shared steps (transform_scripts/common.mlir), declared here, defined once
  // in the library the driver writes.
  transform.named_sequence private @tilefuse_lower_masks(%func: !transform.any_op {transform.readonly})
  transform.named_sequence private @tilefuse_find_root(%dispatch: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_op)

  transform.named_sequence private @tilefuse_pass(%handle: !transform.any_op {transform.readonly})
      -> !transform.any_op
  transform.named_sequence private @tilefuse_skip(%handle: !transform.any_op {transform.readonly})

  // Step "tensor_arith", for a dispatch with arith ops on whole tensors:
  // its stored value (IREE widens a comparison's i1 result to i8 that way)
  // or an input of the root (a bool input, stored as i8, narrowed by an
  // arith.trunci). MLIR's convert-elementwise-to-linalg writes each as a
  // linalg.generic, then elementwise fusion merges it into the generic
  // that reads it, as IREE's formation does with every other elementwise
  // producer. Unfused, a mask of lower rank than the root (a [B, K] key
  // mask broadcast over [B, Q, K] scores) is a rank-2 producer in the
  // thread's tile, which step 7 cannot vectorize with the root's rank-3
  // vector sizes ("Attempted to vectorize, but failed" on SPIR-V, where
  // nothing fused it before the script ran).
  transform.named_sequence @tilefuse_loop_tensor_arith(%func: !transform.any_op {transform.consumed})
      -> !transform.any_op {
    %converted = transform.apply_registered_pass "convert-elementwise-to-linalg" to %func
      : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %converted {
      transform.apply_patterns.iree.linalg_elementwise_greedy_fusion
    } : !transform.any_op
    transform.yield %converted : !transform.any_op
  }

  // Step "lower_transfers", on CUDA: the transfers left after step 7 become
  // vector loads and stores here, a masked one a vector.maskedload. NVVM
  // cannot translate a masked read that broadcasts its element across the
  // vector (a column broadcast, or a gather's row index, in a ragged tile:
  // `permutation_map = (d0) -> (0)`); this reads it as a masked
  // vector<1xT> and broadcasts that. SPIR-V lowers those transfers itself
  // and fails on this form, so it skips the step.
  transform.named_sequence @tilefuse_loop_lower_transfers(%func: !transform.any_op {transform.readonly}) {
    transform.apply_patterns to %func {
      transform.apply_patterns.vector.lower_transfer max_transfer_rank = 1
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.yield
  }

  // Step "split_writes", for a ragged tile written transposed: each thread
  // writes its vector as a column (vector<4x1xT> across 4 output rows),
  // masked where the tile passes the edge. Neither back end lowers a masked
  // transfer of rank 2 ("'vector.transfer_write' op with rank > 1 should be
  // broken down by prior passes": a [2, 77, 128] -> [2, 128, 77] transpose
  // on SPIR-V); this unrolls it into one masked 1-D write per output row.
  // Only there: it would also turn 1-D transposed transfers into scalar
  // loops (docs/findings.md, 'vector.transfer_to_scf').
  transform.named_sequence @tilefuse_loop_split_writes(%func: !transform.any_op {transform.readonly}) {
    transform.apply_patterns to %func {
      transform.apply_patterns.vector.transfer_to_scf max_transfer_rank = 1 full_unroll = true
    } : !transform.any_op
    transform.yield
  }

  // Step "producers": the ops defining the root's inputs (direct producers
  // and the dispatch loads), which steps 2 and 3 fuse into each tile.
  transform.named_sequence @tilefuse_loop_producers(%root: !transform.any_op {transform.readonly})
      -> !transform.any_op {
    %operands = transform.get_operand %root[0] {tilefuse.param = "root_inputs"}
      : (!transform.any_op) -> !transform.any_value
    %producers = transform.get_defining_op %operands
      : (!transform.any_value) -> !transform.any_op
    transform.yield %producers : !transform.any_op
  }
  // ... or none, for a root without inputs (an iota; a reverse, which IREE
  // writes as tensor.extract from a load the body captures): get_operand
  // takes no empty list, so the handle is a match that finds nothing (the
  // root's body holds no tensor.empty).
  transform.named_sequence @tilefuse_loop_no_producers(%root: !transform.any_op {transform.readonly})
      -> !transform.any_op {
    %none = transform.structured.match ops{["tensor.empty"]} in %root
      : (!transform.any_op) -> !transform.any_op
    transform.yield %none : !transform.any_op
  }

  transform.named_sequence @tilefuse_loop(%dispatch: !transform.any_op {transform.readonly}) {
    // Step 1. Find the root: the op whose result the dispatch stores, once
    // (a shared step: transform_scripts/common.mlir), after step
    // "tensor_arith" where the chooser asked for it.
    %func_0, %root_0 = transform.include @tilefuse_find_root failures(propagate) (%dispatch)
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %func_1 = transform.include @tilefuse_pass failures(propagate) (%func_0)
        {tilefuse.step = "tensor_arith"} : (!transform.any_op) -> !transform.any_op
    %func, %root = transform.include @tilefuse_find_root failures(propagate) (%func_1)
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)

    // Step 2. Tile the root to workgroups and pull its producers into the
    // tile, so that each workgroup computes them only for its own slice
    // (nothing goes through global memory between fused ops).
    // The producers are the ops defining the root's inputs: direct producers
    // (linalg ops) and the dispatch loads, which are cloned into the tile.
    // Deeper chains are refused by the chooser, not silently left unfused.
    %producers = transform.include @tilefuse_loop_producers failures(propagate) (%root)
        {tilefuse.step = "producers"} : (!transform.any_op) -> !transform.any_op
    %wg_root, %grid = transform.structured.tile_using_forall %root
        tile_sizes [1, 1024] (mapping = [#gpu.block<y>, #gpu.block<x>])
        {tilefuse.param = "workgroup_tile"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.structured.fuse_into_containing_op %producers into %grid
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.iree.populate_workgroup_count_region_using_num_threads_slice %grid
      : (!transform.any_op) -> ()
    // A fused tensor.pad comes back wrapped in `scf.if (source slice empty)
    // { all padding } else { pad(slice) }`. The else branch is right in both
    // cases (padding an empty slice gives all padding) and, unlike the if, it
    // can be tiled again and vectorized: keep it. Canonicalization then folds
    // the cast the branch leaves, so the pad is again the root's producer.
    // Dispatches without a pad have no scf.if here.
    %wg_pad_guards = transform.structured.match ops{["scf.if"]} in %grid
      : (!transform.any_op) -> !transform.any_op
    transform.scf.take_assumed_branch %wg_pad_guards take_else_branch
      : (!transform.any_op) -> ()
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op

    // Step 3. Tile the workgroup's slice to threads, fusing producers again.
    // num_threads (not tile sizes) keeps the thread count static even for the
    // last, partial tile of a size that does not divide: each thread then gets
    // at most one vector, and masks (step 4) cover the ragged end.
    %wg_producers = transform.include @tilefuse_loop_producers failures(propagate) (%wg_root)
        {tilefuse.step = "producers"} : (!transform.any_op) -> !transform.any_op
    %thread_root, %threads = transform.structured.tile_using_forall %wg_root
        num_threads [0, 256] (mapping = [#gpu.thread<x>])
        {tilefuse.param = "thread_count"}
      : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.structured.fuse_into_containing_op %wg_producers into %threads
      : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %thread_pad_guards = transform.structured.match ops{["scf.if"]} in %threads
      : (!transform.any_op) -> !transform.any_op
    transform.scf.take_assumed_branch %thread_pad_guards take_else_branch
      : (!transform.any_op) -> ()

    // The thread tiling sized a ragged workgroup tile with `tensor.dim` of
    // the root's operand; when that operand is a pad, resolve the dim from
    // the pad's source so the workgroup-level pad dies (it would otherwise
    // be materialized in workgroup memory).
    transform.apply_patterns to %func {
      transform.apply_patterns.memref.resolve_ranked_shaped_type_result_dims
      transform.apply_patterns.linalg.tiling_canonicalization
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op

    // Step 4. Vectorize every op inside the thread forall to one vector of
    // vector_sizes; when the tile is smaller (ragged end), the transfers are
    // masked instead of reading a padded copy. A thread's slice of a pad
    // becomes a load of the source masked by the source's bounds, with the
    // padding value in the masked-off lanes (pad specialization); its result
    // is forwarded to the root's read, so no padded tile is stored either.
    // vectorize_nd_extract: a tensor.extract in a body (a gather) becomes a
    // contiguous load, a broadcast load or a vector.gather, as the
    // vectorizer reads its indices (without it, vectorizing such a body
    // fails); it changes nothing in a body without one.
    %thread_linalg = transform.structured.match interface{LinalgOp} in %threads
      : (!transform.any_op) -> !transform.any_op
    %thread_pads = transform.structured.match ops{["tensor.pad"]} in %threads
      : (!transform.any_op) -> !transform.any_op
    %thread_ops = transform.merge_handles %thread_linalg, %thread_pads : !transform.any_op
    transform.structured.vectorize %thread_ops vector_sizes [1, 4] vectorize_nd_extract
        {tilefuse.param = "vector_sizes"} : !transform.any_op
    // Masks first, in a pattern set of their own (the shared step says why:
    // found with a pad of [2, 1, 1] to [2, 2, 1], whose padding lanes read
    // the next row's value), then 1-D masked transfers.
    transform.include @tilefuse_lower_masks failures(propagate) (%func)
      : (!transform.any_op) -> ()

    // Step 5. Bufferize. The dispatch writes straight into its output
    // binding once the empty tensors are gone.
    transform.iree.eliminate_empty_tensors %func : (!transform.any_op) -> ()
    %bufferized = transform.iree.bufferize <{target_gpu}> %func
      : (!transform.any_op) -> !transform.any_op
    // Bufferization leaves self-copies behind (a copy whose source and
    // destination are the same buffer); canonicalization removes them.
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %bufferized : !transform.any_op

    // Step 6. Map the foralls onto the hardware: the outer one to workgroup
    // ids, the inner one to thread ids.
    transform.iree.forall_to_workgroup %bufferized : (!transform.any_op) -> ()
    transform.iree.map_nested_forall_to_gpu_threads %bufferized
        workgroup_dims = [256, 1, 1] subgroup_size = 8
        {tilefuse.param = "workgroup_dims"} : (!transform.any_op) -> ()

    // Step 7. Lower what is left of the vector dialect to what the SPIR-V and
    // NVVM back ends take: 1-D transfers, masks as selects (a pad's bounds
    // mask is computed, not constant: materialize it as a compare). Masks
    // are lowered on their own first, as in step 4.
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.vector.lower_masks
    } : !transform.any_op
    transform.include @tilefuse_skip failures(propagate) (%bufferized)
        {tilefuse.step = "split_writes"} : (!transform.any_op) -> ()
    // A gather (step 4) becomes one 1-D vector.gather per row of the
    // thread's vector (lower_gather); each back end lowers that to a scalar
    // load per element (SPIR-V: IREE's conditional loads; NVVM:
    // llvm.masked.gather, which NVPTX scalarizes).
    transform.apply_patterns to %bufferized {
      transform.apply_patterns.vector.lower_gather
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.vector.lower_masked_transfers
      transform.apply_patterns.vector.materialize_masks
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.include @tilefuse_skip failures(propagate) (%bufferized)
        {tilefuse.step = "lower_transfers"} : (!transform.any_op) -> ()
    transform.apply_cse to %bufferized : !transform.any_op

    // Step 8. Tell IREE the kernel is finished (no further codegen
    // pipeline) and which workgroup size it was written for.
    %done = transform.param.constant #iree_codegen.translation_info<
        pipeline = #iree_codegen.no_pipeline workgroup_size = [256, 1, 1]
        subgroup_size = 8> {tilefuse.param = "translation_info"} -> !transform.any_param
    transform.annotate %bufferized "translation_info" = %done
      : !transform.any_op, !transform.any_param

    // Step 9. Print the finished kernel. IREE exits 0 even when a transform
    // library fails to load, so the driver reads this printout to check that
    // the strategy really ran (python/tilefuse/verify.py).
    transform.print %bufferized : !transform.any_op
    transform.yield
  }
}
